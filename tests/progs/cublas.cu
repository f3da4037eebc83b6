// cuBLAS and cuBLASLt through rgpu: handle settings, host<->device vector
// and matrix copies (strided, pitched, async), gemm in both pointer modes
// and all transposes, Dgemm, batched and strided-batched gemm, GemmEx,
// level 1 and gemv, and cuBLASLt matmuls with a bias epilogue chosen by the
// heuristics.  Each result is checked against a CPU reference computed in
// double.
//
// Tolerance, per element: |got - ref| <= tol * (|alpha| * sum_l |a_il b_lj|
// + |beta c_ij| + |bias_i|), which holds whatever order the GPU sums in;
// tol is 1e-4 for fp32, 5e-3 for TF32 (inputs rounded to 10 mantissa bits)
// and 1e-12 for fp64.  The inputs are multiples of 1/64 in [-1, 1), so in
// practice every product and sum here is exact in fp32 (and in TF32), and
// the results are the same on every GPU and through rgpu.  Computed values
// are never printed: the output must be identical natively and through rgpu.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <cublasLt.h>
#include <cublas_v2.h>
#include "check.h"

#define M 64
#define N 48
#define K 32

static cudaStream_t stream;
static void *workspace;         // the cuBLAS handle's, freed after it

static const double TOL32 = 1e-4, TOL_TF32 = 5e-3, TOL64 = 1e-12;

static bool check_blas(cublasStatus_t s, const char *name)
{
    return check(s == CUBLAS_STATUS_SUCCESS, name, "%s", cublasGetStatusName(s));
}

// Setup that must work for the rest to mean anything: report and stop.
static void must(bool ok, const char *what)
{
    if (!ok) {
        check(false, what, "setup failed");
        exit(1);
    }
}

// Deterministic inputs: multiples of 1/64 in [-1, 1).
template <typename T>
static std::vector<T> data(size_t n, unsigned seed)
{
    std::vector<T> v(n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (T)((int)((seed >> 16) % 128) - 64) / 64;
    }
    return v;
}

template <typename T>
static T *to_dev(const std::vector<T> &h)
{
    T *d = NULL;
    must(cudaMalloc((void **)&d, h.size() * sizeof(T)) == cudaSuccess &&
             cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess,
         "copy to device");
    return d;
}

// Reads n elements back; waits for the stream first.
template <typename T>
static std::vector<T> from_dev(const T *d, size_t n)
{
    std::vector<T> h(n);
    must(cudaStreamSynchronize(stream) == cudaSuccess &&
             cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess,
         "copy from device");
    return h;
}

// Reference gemm: ref and scale (the tolerance's sum of magnitudes) are
// compact m x n; C is not read when beta is 0, as cuBLAS documents.
template <typename T>
static void ref_gemm(bool ta, bool tb, int m, int n, int k, double alpha, const T *A, int lda,
                     const T *B, int ldb, double beta, const T *C, int ldc, double *ref,
                     double *scale)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double acc = 0, mag = 0;
            for (int l = 0; l < k; l++) {
                double p = (double)(ta ? A[l + i * lda] : A[i + l * lda]) *
                           (double)(tb ? B[j + l * ldb] : B[l + j * ldb]);
                acc += p;
                mag += fabs(p);
            }
            double c = beta != 0 ? beta * (double)C[i + j * ldc] : 0;
            ref[i + j * m] = alpha * acc + c;
            scale[i + j * m] = fabs(alpha) * mag + fabs(c);
        }
}

// Whether the m x n matrix got (leading dimension ldg) matches the
// reference; prints the check line.
template <typename T>
static bool matches(const char *name, const T *got, int ldg, const double *ref,
                    const double *scale, int m, int n, double tol)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double err = fabs((double)got[i + j * ldg] - ref[i + j * m]);
            if (!(err <= tol * scale[i + j * m]))      // NaN fails too
                return check(false, name, "element (%d, %d) outside the tolerance", i, j);
        }
    return check(true, name, " ");
}

// ---- Handle settings --------------------------------------------------------------------------

static void test_handle(cublasHandle_t h)
{
    int version = 0;
    cublasStatus_t s = cublasGetVersion(h, &version);
    check(s == CUBLAS_STATUS_SUCCESS && version > 0, "cublasGetVersion > 0", "%s",
          cublasGetStatusName(s));

    cublasPointerMode_t pm = CUBLAS_POINTER_MODE_HOST;
    s = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasGetPointerMode(h, &pm);
    check(s == CUBLAS_STATUS_SUCCESS && pm == CUBLAS_POINTER_MODE_DEVICE,
          "cublasSetPointerMode/GetPointerMode", "%s, mode %d", cublasGetStatusName(s), (int)pm);
    check_blas(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode host");

    cublasMath_t mm = CUBLAS_TF32_TENSOR_OP_MATH;
    s = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasGetMathMode(h, &mm);
    check(s == CUBLAS_STATUS_SUCCESS && mm == CUBLAS_DEFAULT_MATH,
          "cublasSetMathMode/GetMathMode", "%s, mode %d", cublasGetStatusName(s), (int)mm);

    cublasAtomicsMode_t am = CUBLAS_ATOMICS_NOT_ALLOWED;
    s = cublasSetAtomicsMode(h, CUBLAS_ATOMICS_ALLOWED);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasGetAtomicsMode(h, &am);
    check(s == CUBLAS_STATUS_SUCCESS && am == CUBLAS_ATOMICS_ALLOWED,
          "cublasSetAtomicsMode/GetAtomicsMode", "%s, mode %d", cublasGetStatusName(s), (int)am);
    check_blas(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED), "cublasSetAtomicsMode back");

    // From here on everything runs on a created stream.
    cudaStream_t got = NULL;
    s = cublasSetStream(h, stream);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasGetStream(h, &got);
    check(s == CUBLAS_STATUS_SUCCESS && got == stream, "cublasSetStream/GetStream", "%s",
          cublasGetStatusName(s));

    // After the stream: setting a stream drops a user workspace.
    must(cudaMalloc(&workspace, 4 << 20) == cudaSuccess, "cudaMalloc workspace");
    check_blas(cublasSetWorkspace(h, workspace, 4 << 20), "cublasSetWorkspace");
}

// ---- Vectors and matrices between host and device ----------------------------------------------

static void test_vectors(bool async)
{
    const int n = 100;
    const char *set = async ? "cublasSetVectorAsync" : "cublasSetVector";
    const char *get = async ? "cublasGetVectorAsync" : "cublasGetVector";
    char name[128];
    std::vector<float> x = data<float>(2 * n, 20), dev(3 * n), back(2 * n, -7.0f);
    float *d = NULL;

    must(cudaMalloc((void **)&d, 3 * n * sizeof(float)) == cudaSuccess &&
             cudaMemset(d, 0, 3 * n * sizeof(float)) == cudaSuccess,
         "cudaMalloc vector");
    // Host stride 2 to device stride 3: the gaps on the device stay zero.
    cublasStatus_t s = async ? cublasSetVectorAsync(n, sizeof(float), x.data(), 2, d, 3, stream)
                             : cublasSetVector(n, sizeof(float), x.data(), 2, d, 3);
    if (check_blas(s, fmt_name(name, sizeof name, "%s incx 2 incy 3", set))) {
        dev = from_dev(d, 3 * n);
        int bad = -1;
        for (int i = 0; i < 3 * n && bad < 0; i++)
            if (dev[i] != (i % 3 ? 0.0f : x[2 * (i / 3)]))
                bad = i;
        check(bad < 0, fmt_name(name, sizeof name, "%s data", set), "device element %d", bad);
    }
    // Device stride 3 back to host stride 2: the host gaps keep their -7.
    s = async ? cublasGetVectorAsync(n, sizeof(float), d, 3, back.data(), 2, stream)
              : cublasGetVector(n, sizeof(float), d, 3, back.data(), 2);
    if (async && s == CUBLAS_STATUS_SUCCESS && cudaStreamSynchronize(stream) != cudaSuccess)
        s = CUBLAS_STATUS_EXECUTION_FAILED;
    if (check_blas(s, fmt_name(name, sizeof name, "%s incx 3 incy 2", get))) {
        int bad = -1;
        for (int i = 0; i < 2 * n && bad < 0; i++)
            if (back[i] != (i % 2 ? -7.0f : x[i]))
                bad = i;
        check(bad < 0, fmt_name(name, sizeof name, "%s data", get), "host element %d", bad);
    }
    cudaFree(d);
}

static void test_matrices(bool async)
{
    const int rows = 5, cols = 4, lda = 7, ldb = 6, ldh = 8;
    const char *set = async ? "cublasSetMatrixAsync" : "cublasSetMatrix";
    const char *get = async ? "cublasGetMatrixAsync" : "cublasGetMatrix";
    char name[128];
    std::vector<float> a = data<float>(lda * cols, 21), back(ldh * cols, -7.0f);
    float *d = NULL;

    must(cudaMalloc((void **)&d, ldb * cols * sizeof(float)) == cudaSuccess &&
             cudaMemset(d, 0, ldb * cols * sizeof(float)) == cudaSuccess,
         "cudaMalloc matrix");
    cublasStatus_t s =
        async ? cublasSetMatrixAsync(rows, cols, sizeof(float), a.data(), lda, d, ldb, stream)
              : cublasSetMatrix(rows, cols, sizeof(float), a.data(), lda, d, ldb);
    if (check_blas(s, fmt_name(name, sizeof name, "%s lda 7 ldb 6", set))) {
        std::vector<float> dev = from_dev(d, ldb * cols);
        int bad = -1;
        for (int i = 0; i < ldb * cols && bad < 0; i++)
            if (dev[i] != (i % ldb < rows ? a[i % ldb + i / ldb * lda] : 0.0f))
                bad = i;
        check(bad < 0, fmt_name(name, sizeof name, "%s data", set), "device element %d", bad);
    }
    s = async ? cublasGetMatrixAsync(rows, cols, sizeof(float), d, ldb, back.data(), ldh, stream)
              : cublasGetMatrix(rows, cols, sizeof(float), d, ldb, back.data(), ldh);
    if (async && s == CUBLAS_STATUS_SUCCESS && cudaStreamSynchronize(stream) != cudaSuccess)
        s = CUBLAS_STATUS_EXECUTION_FAILED;
    if (check_blas(s, fmt_name(name, sizeof name, "%s lda 6 ldb 8", get))) {
        int bad = -1;
        for (int i = 0; i < ldh * cols && bad < 0; i++)
            if (back[i] != (i % ldh < rows ? a[i % ldh + i / ldh * lda] : -7.0f))
                bad = i;
        check(bad < 0, fmt_name(name, sizeof name, "%s data", get), "host element %d", bad);
    }
    cudaFree(d);
}

// ---- gemm ----------------------------------------------------------------------------------

// Sgemm with every transpose pair and padded leading dimensions, host
// alpha/beta; the padding rows of C must stay as they were.
static void test_sgemm(cublasHandle_t h)
{
    const float alpha = 1.5f, beta = -0.5f;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? K : M) + 3, ldb = (tb ? N : K) + 1, ldc = M + 2;
            std::vector<float> A = data<float>(lda * (ta ? M : K), 1);
            std::vector<float> B = data<float>(ldb * (tb ? K : N), 2);
            std::vector<float> C = data<float>(ldc * N, 3);
            std::vector<double> ref(M * N), scale(M * N);
            char name[64];
            fmt_name(name, sizeof name, "cublasSgemm %c%c", ta ? 'T' : 'N', tb ? 'T' : 'N');
            ref_gemm(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc,
                     ref.data(), scale.data());
            float *dA = to_dev(A), *dB = to_dev(B), *dC = to_dev(C);
            if (check_blas(cublasSgemm(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                       tb ? CUBLAS_OP_T : CUBLAS_OP_N, M, N, K, &alpha, dA, lda,
                                       dB, ldb, &beta, dC, ldc),
                           name)) {
                std::vector<float> got = from_dev(dC, ldc * N);
                strcat(name, " result");
                if (matches(name, got.data(), ldc, ref.data(), scale.data(), M, N, TOL32)) {
                    bool pad = true;
                    for (int j = 0; j < N; j++)
                        for (int i = M; i < ldc; i++)
                            pad = pad && got[i + j * ldc] == C[i + j * ldc];
                    strcat(name, " padding");
                    check(pad, name, "padding of C was written");
                }
            }
            cudaFree(dA);
            cudaFree(dB);
            cudaFree(dC);
        }
}

// alpha and beta in device memory; then beta = 0 over a C of NaNs, which
// cuBLAS does not read.
static void test_sgemm_modes(cublasHandle_t h)
{
    std::vector<float> A = data<float>(M * K, 4), B = data<float>(K * N, 5);
    std::vector<float> C = data<float>(M * N, 6), ab = {0.75f, -0.5f};
    std::vector<double> ref(M * N), scale(M * N);
    float *dA = to_dev(A), *dB = to_dev(B), *dC = to_dev(C), *dab = to_dev(ab);

    ref_gemm(false, false, M, N, K, ab[0], A.data(), M, B.data(), K, ab[1], C.data(), M,
             ref.data(), scale.data());
    cublasStatus_t s = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, dab, dA, M, dB, K, dab + 1, dC, M);
    cublasStatus_t s2 = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
    if (check_blas(s, "cublasSgemm device alpha/beta") &&
        check_blas(s2, "cublasSetPointerMode host again"))
        matches("cublasSgemm device alpha/beta result", from_dev(dC, M * N).data(), M,
                ref.data(), scale.data(), M, N, TOL32);

    const float alpha = 2.0f, beta = 0.0f;
    must(cudaMemset(dC, 0xff, M * N * sizeof(float)) == cudaSuccess, "cudaMemset NaNs");
    ref_gemm(false, false, M, N, K, alpha, A.data(), M, B.data(), K, beta, C.data(), M,
             ref.data(), scale.data());
    if (check_blas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, dA, M, dB, K,
                               &beta, dC, M),
                   "cublasSgemm beta 0 over NaNs"))
        matches("cublasSgemm beta 0 over NaNs result", from_dev(dC, M * N).data(), M,
                ref.data(), scale.data(), M, N, TOL32);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    cudaFree(dab);
}

static void test_dgemm(cublasHandle_t h)
{
    const double alpha = -1.25, beta = 0.5;
    const int lda = K + 1, ldb = K + 2, ldc = M + 1;     // op(A) = A^T
    std::vector<double> A = data<double>(lda * M, 7), B = data<double>(ldb * N, 8);
    std::vector<double> C = data<double>(ldc * N, 9), ref(M * N), scale(M * N);
    double *dA = to_dev(A), *dB = to_dev(B), *dC = to_dev(C);

    ref_gemm(true, false, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc,
             ref.data(), scale.data());
    if (check_blas(cublasDgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &alpha, dA, lda, dB, ldb,
                               &beta, dC, ldc),
                   "cublasDgemm TN"))
        matches("cublasDgemm TN result", from_dev(dC, ldc * N).data(), ldc, ref.data(),
                scale.data(), M, N, TOL64);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
}

// Three products; strides larger than the matrices.  SgemmStridedBatched,
// then SgemmBatched over the same matrices through device arrays of device
// pointers (listed in reverse order), then GemmStridedBatchedEx.
static void test_batched(cublasHandle_t h)
{
    const int batch = 3, stride = M * N + 17;
    const float alpha = 1.0f, beta = 0.25f;
    std::vector<float> A = data<float>(batch * stride, 10), B = data<float>(batch * stride, 11);
    std::vector<float> C = data<float>(batch * stride, 12);
    std::vector<double> ref(batch * M * N), scale(batch * M * N);
    float *dA = to_dev(A), *dB = to_dev(B), *dC = to_dev(C);

    for (int b = 0; b < batch; b++)       // op(B) = B^T: B is N x K
        ref_gemm(false, true, M, N, K, alpha, &A[b * stride], M, &B[b * stride], N, beta,
                 &C[b * stride], M, &ref[b * M * N], &scale[b * M * N]);

    // Every call starts from the same C.
    auto compare = [&](const char *name) {
        std::vector<float> got = from_dev(dC, batch * stride);
        char sub[128];
        for (int b = 0; b < batch; b++)
            if (!matches(fmt_name(sub, sizeof sub, "%s result %d", name, b), &got[b * stride], M,
                         &ref[b * M * N], &scale[b * M * N], M, N, TOL32))
                break;
        must(cudaMemcpy(dC, C.data(), C.size() * sizeof(float), cudaMemcpyHostToDevice) ==
                 cudaSuccess,
             "reset C");
    };

    if (check_blas(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, M, N, K, &alpha, dA, M,
                                             stride, dB, N, stride, &beta, dC, M, stride, batch),
                   "cublasSgemmStridedBatched"))
        compare("cublasSgemmStridedBatched");

    std::vector<float *> ptrs(3 * batch);
    for (int i = 0; i < batch; i++) {
        int b = batch - 1 - i;
        ptrs[i] = dA + b * stride;
        ptrs[batch + i] = dB + b * stride;
        ptrs[2 * batch + i] = dC + b * stride;
    }
    float **dptrs = to_dev(ptrs);
    if (check_blas(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, M, N, K, &alpha,
                                      (const float *const *)dptrs, M,
                                      (const float *const *)dptrs + batch, N, &beta,
                                      dptrs + 2 * batch, M, batch),
                   "cublasSgemmBatched"))
        compare("cublasSgemmBatched");

    if (check_blas(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_T, M, N, K, &alpha, dA,
                                              CUDA_R_32F, M, stride, dB, CUDA_R_32F, N, stride,
                                              &beta, dC, CUDA_R_32F, M, stride, batch,
                                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   "cublasGemmStridedBatchedEx 32F"))
        compare("cublasGemmStridedBatchedEx 32F");
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    cudaFree(dptrs);
}

static void test_gemm_ex(cublasHandle_t h)
{
    const float alpha = 0.5f, beta = 1.0f;
    std::vector<float> A = data<float>(K * M, 13), B = data<float>(K * N, 14);
    std::vector<float> C = data<float>(M * N, 15);
    std::vector<double> ref(M * N), scale(M * N);
    float *dA = to_dev(A), *dB = to_dev(B), *dC = to_dev(C);
    const struct { cublasComputeType_t type; const char *name; double tol; } types[] = {
        {CUBLAS_COMPUTE_32F, "cublasGemmEx 32F", TOL32},
        {CUBLAS_COMPUTE_32F_FAST_TF32, "cublasGemmEx 32F_FAST_TF32", TOL_TF32},
    };

    ref_gemm(true, false, M, N, K, alpha, A.data(), K, B.data(), K, beta, C.data(), M,
             ref.data(), scale.data());
    for (const auto &t : types) {
        char name[64];
        must(cudaMemcpy(dC, C.data(), C.size() * sizeof(float), cudaMemcpyHostToDevice) ==
                 cudaSuccess,
             "reset C");
        if (check_blas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, M, N, K, &alpha, dA, CUDA_R_32F,
                                    K, dB, CUDA_R_32F, K, &beta, dC, CUDA_R_32F, M, t.type,
                                    CUBLAS_GEMM_DEFAULT),
                       t.name))
            matches(fmt_name(name, sizeof name, "%s result", t.name), from_dev(dC, M * N).data(),
                    M, ref.data(), scale.data(), M, N, t.tol);
    }
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
}

// ---- Level 1 and gemv --------------------------------------------------------------------

static void test_level1(cublasHandle_t h)
{
    const int n = 1000;
    std::vector<float> x = data<float>(2 * n, 16), y = data<float>(3 * n, 17);
    x[2 * 123] = 1.5f;                  // the largest magnitude, twice: the
    x[2 * 456] = -1.5f;                 // first (1-based 124) wins
    float *dx = to_dev(x), *dy = to_dev(y), *dres = NULL;
    must(cudaMalloc((void **)&dres, sizeof(float)) == cudaSuccess, "cudaMalloc result");

    double dot = 0, dotmag = 0, sq = 0, sum = 0;
    for (int i = 0; i < n; i++) {
        dot += (double)x[2 * i] * y[3 * i];
        dotmag += fabs((double)x[2 * i] * y[3 * i]);
        sq += (double)x[2 * i] * x[2 * i];
        sum += fabs(x[2 * i]);
    }

    float r = 0;
    if (check_blas(cublasSdot(h, n, dx, 2, dy, 3, &r), "cublasSdot host result"))
        check(fabs(r - dot) <= TOL32 * dotmag, "cublasSdot host result value", "off");

    cublasStatus_t s = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSdot(h, n, dx, 2, dy, 3, dres);
    cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
    if (check_blas(s, "cublasSdot device result"))
        check(fabs(from_dev(dres, 1)[0] - dot) <= TOL32 * dotmag, "cublasSdot device result value",
              "off");

    if (check_blas(cublasSnrm2(h, n, dx, 2, &r), "cublasSnrm2"))
        check(fabs(r - sqrt(sq)) <= TOL32 * sqrt(sq), "cublasSnrm2 value", "off");
    if (check_blas(cublasSasum(h, n, dx, 2, &r), "cublasSasum"))
        check(fabs(r - sum) <= TOL32 * sum, "cublasSasum value", "off");
    int idx = 0;
    if (check_blas(cublasIsamax(h, n, dx, 2, &idx), "cublasIsamax"))
        check(idx == 124, "cublasIsamax is 1-based, first of equals", "index %d", idx);

    // y = alpha x + y with strides; the gaps of y stay.
    const float alpha = -0.75f;
    if (check_blas(cublasSaxpy(h, n, &alpha, dx, 2, dy, 3), "cublasSaxpy incx 2 incy 3")) {
        std::vector<float> got = from_dev(dy, 3 * n);
        int bad = -1;
        for (int i = 0; i < 3 * n && bad < 0; i++) {
            double want = i % 3 ? y[i] : y[i] + (double)alpha * x[2 * (i / 3)];
            if (!(fabs(got[i] - want) <= TOL32 * (fabs(y[i]) + 1)))
                bad = i;
        }
        check(bad < 0, "cublasSaxpy result", "element %d", bad);
    }

    // x *= alpha (alpha in device memory), then y = x (contiguous).
    float *dalpha = to_dev(std::vector<float>{2.0f});
    s = cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSscal(h, n, dalpha, dx, 2);
    cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST);
    if (check_blas(s, "cublasSscal device alpha") &&
        check_blas(cublasScopy(h, n, dx, 2, dy, 1), "cublasScopy")) {
        std::vector<float> gx = from_dev(dx, 2 * n), gy = from_dev(dy, n);
        int bad = -1;
        for (int i = 0; i < 2 * n && bad < 0; i++)
            if (gx[i] != (i % 2 ? x[i] : 2 * x[i]) || (i % 2 == 0 && gy[i / 2] != 2 * x[i]))
                bad = i;
        check(bad < 0, "cublasSscal/Scopy result", "element %d", bad);
    }
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dres);
    cudaFree(dalpha);

    // Double precision axpy and dot.
    std::vector<double> a = data<double>(n, 18), b = data<double>(n, 19);
    double *da = to_dev(a), *db = to_dev(b), alpha64 = 0.5, d = 0;
    double want = 0, mag = 0;
    for (int i = 0; i < n; i++) {
        want += a[i] * (b[i] + alpha64 * a[i]);
        mag += fabs(a[i] * (b[i] + alpha64 * a[i]));
    }
    if (check_blas(cublasDaxpy(h, n, &alpha64, da, 1, db, 1), "cublasDaxpy") &&
        check_blas(cublasDdot(h, n, da, 1, db, 1, &d), "cublasDdot"))
        check(fabs(d - want) <= TOL64 * mag, "cublasDaxpy/Ddot value", "off");
    cudaFree(da);
    cudaFree(db);
}

static void test_gemv(cublasHandle_t h)
{
    const int m = 37, n = 29, lda = 40;
    const float alpha = 1.25f, beta = -1.0f;
    std::vector<float> A = data<float>(lda * n, 22);
    for (int t = 0; t < 2; t++) {
        int lx = t ? m : n, ly = t ? n : m;
        std::vector<float> x = data<float>(2 * lx, 23), y = data<float>(ly, 24);
        std::vector<double> ref(ly), scale(ly);
        // y as a ly x 1 matrix, x as the k x 1 operand with stride 2.
        for (int i = 0; i < ly; i++) {
            double acc = 0, mag = 0;
            for (int j = 0; j < lx; j++) {
                double p = (double)(t ? A[j + i * lda] : A[i + j * lda]) * x[2 * j];
                acc += p;
                mag += fabs(p);
            }
            ref[i] = alpha * acc + beta * y[i];
            scale[i] = fabs(alpha) * mag + fabs(beta * y[i]);
        }
        float *dA = to_dev(A), *dx = to_dev(x), *dy = to_dev(y);
        const char *name = t ? "cublasSgemv T" : "cublasSgemv N";
        char sub[64];
        if (check_blas(cublasSgemv(h, t ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, &alpha, dA, lda, dx, 2,
                                   &beta, dy, 1),
                       name))
            matches(fmt_name(sub, sizeof sub, "%s result", name), from_dev(dy, ly).data(), ly,
                    ref.data(), scale.data(), ly, 1, TOL32);
        cudaFree(dA);
        cudaFree(dx);
        cudaFree(dy);
    }
}

// ---- cuBLASLt ------------------------------------------------------------------------------

// D = epilogue(alpha op(A) B + beta C + bias) for a 64 x 32 x 48 fp32
// problem, the algorithm from the heuristics (one asked for).  With
// in_place, D is C (same layout, as cuBLASLt requires).
static void test_lt(cublasLtHandle_t lt, bool device_scalars, bool relu, bool trans_a,
                    bool in_place)
{
    const int m = 64, n = 32, k = 48, lda = trans_a ? k : m;
    const size_t ws_size = 4 << 20;
    char name[160], sub[200];
    fmt_name(name, sizeof name, "cublasLtMatmul %s %s scalars%s%s",
             relu ? "RELU_BIAS" : "BIAS", device_scalars ? "device" : "host",
             trans_a ? " transa T" : "", in_place ? " D=C" : "");

    std::vector<float> A = data<float>(lda * (trans_a ? m : k), 30), B = data<float>(k * n, 31);
    std::vector<float> C = data<float>(m * n, 32), bias = data<float>(m, 33);
    std::vector<float> ab = {1.5f, 0.5f};
    std::vector<double> ref(m * n), scale(m * n);
    ref_gemm(trans_a, false, m, n, k, ab[0], A.data(), lda, B.data(), k, ab[1], C.data(), m,
             ref.data(), scale.data());
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double v = ref[i + j * m] + bias[i];
            ref[i + j * m] = relu && v < 0 ? 0 : v;
            scale[i + j * m] += fabs(bias[i]);
        }

    float *dA = to_dev(A), *dB = to_dev(B), *dC = to_dev(C), *dbias = to_dev(bias);
    float *dab = to_dev(ab), *dD = dC;
    void *ws = NULL;
    if (!in_place)
        must(cudaMalloc((void **)&dD, m * n * sizeof(float)) == cudaSuccess, "cudaMalloc D");
    must(cudaMalloc(&ws, ws_size) == cudaSuccess, "cudaMalloc workspace");

    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtEpilogue_t epi = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtPointerMode_t pm = device_scalars ? CUBLASLT_POINTER_MODE_DEVICE
                                              : CUBLASLT_POINTER_MODE_HOST;
    uint64_t max_ws = ws_size;
    cublasStatus_t s = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias,
                                           sizeof dbias);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, sizeof pm);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, trans_a ? k : m, trans_a ? m : k, lda);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &max_ws, sizeof max_ws);
    check_blas(s, fmt_name(sub, sizeof sub, "%s descriptors", name));

    // Attributes read back as set: the epilogue, and the size query.
    uint32_t got_epi = 0;
    size_t written = 0, need = 0;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &got_epi,
                                           sizeof got_epi, &written);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, NULL, 0, &need);
    check(s == CUBLAS_STATUS_SUCCESS && got_epi == (uint32_t)epi && written == sizeof got_epi &&
              need == sizeof(void *),
          fmt_name(sub, sizeof sub, "%s attributes read back", name), "%s",
          cublasGetStatusName(s));

    cublasLtMatmulHeuristicResult_t res;
    int count = 0;
    memset(&res, 0, sizeof res);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &count);
    check(s == CUBLAS_STATUS_SUCCESS && count >= 1 && res.state == CUBLAS_STATUS_SUCCESS &&
              res.workspaceSize <= ws_size,
          fmt_name(sub, sizeof sub, "%s heuristic", name), "%s, %d results",
          cublasGetStatusName(s), count);
    // Which algorithm the heuristics chose, as a digest of its 64 bytes: a
    // run through rgpu must get the same one as a native run on that GPU.
    if (s == CUBLAS_STATUS_SUCCESS && count >= 1) {
        uint64_t h = 1469598103934665603ull;
        const unsigned char *b = (const unsigned char *)&res.algo;
        for (size_t i = 0; i < sizeof res.algo; i++)
            h = (h ^ b[i]) * 1099511628211ull;
        printf("info %s heuristic algorithm %016llx\n", name, (unsigned long long)h);
    }

    if (s == CUBLAS_STATUS_SUCCESS && count >= 1) {
        const void *alpha = device_scalars ? (const void *)dab : (const void *)&ab[0];
        const void *beta = device_scalars ? (const void *)(dab + 1) : (const void *)&ab[1];
        s = cublasLtMatmul(lt, op, alpha, dA, la, dB, lb, beta, dC, lc, dD, lc, &res.algo, ws,
                           ws_size, stream);
        if (check_blas(s, name))
            matches(fmt_name(sub, sizeof sub, "%s result", name), from_dev(dD, m * n).data(), m,
                    ref.data(), scale.data(), m, n, TOL32);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(op);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    if (!in_place)
        cudaFree(dD);
    cudaFree(dbias);
    cudaFree(dab);
    cudaFree(ws);
}

int main(void)
{
    cublasHandle_t h;
    cublasLtHandle_t lt;

    must(check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate"), "cudaStreamCreate");
    must(check_blas(cublasCreate(&h), "cublasCreate"), "cublasCreate");
    test_handle(h);
    test_vectors(false);
    test_vectors(true);
    test_matrices(false);
    test_matrices(true);
    test_sgemm(h);
    test_sgemm_modes(h);
    test_dgemm(h);
    test_batched(h);
    test_gemm_ex(h);
    test_level1(h);
    test_gemv(h);
    check_blas(cublasDestroy(h), "cublasDestroy");
    cudaFree(workspace);

    must(check_blas(cublasLtCreate(&lt), "cublasLtCreate"), "cublasLtCreate");
    check(cublasLtGetVersion() > 0, "cublasLtGetVersion > 0", "zero");
    test_lt(lt, true, false, false, false);
    test_lt(lt, false, false, false, true);
    test_lt(lt, false, true, true, false);
    check_blas(cublasLtDestroy(lt), "cublasLtDestroy");
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return check_exit_status();
}

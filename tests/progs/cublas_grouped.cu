// cuBLAS grouped batched gemms through rgpu: cublasSgemmGroupedBatched,
// cublasDgemmGroupedBatched and cublasGemmGroupedBatchedEx (32F compute),
// two groups of different shapes, transposes, alpha and beta (host arrays,
// one value per group) over device arrays of device pointers, each result
// checked against a CPU reference computed in double.  (Bad sizes are not
// tried: the calls go without waiting through rgpu, so cuBLAS's verdict
// comes back at a later call, not from the call itself as natively.)
//
// Tolerance, per element: 1e-4 * (|alpha| sum |a b| + |beta c|) + 1e-12.
// The inputs are multiples of 1/8 in [-1, 1), so every product and sum is
// exact in fp32 whatever order the GPU sums in.  Computed values are never
// printed: the output must be identical natively and through rgpu.
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <cublas_v2.h>
#include "check.h"

static const int GROUPS = 2;
static const cublasOperation_t TA[GROUPS] = { CUBLAS_OP_N, CUBLAS_OP_T };
static const cublasOperation_t TB[GROUPS] = { CUBLAS_OP_N, CUBLAS_OP_N };
static const int MS[GROUPS] = { 2, 3 }, NS[GROUPS] = { 3, 2 }, KS[GROUPS] = { 4, 2 };
static const int SIZES[GROUPS] = { 2, 1 };
static const double ALPHA[GROUPS] = { 1.0, 2.0 }, BETA[GROUPS] = { 0.0, 0.5 };

static void must(bool ok, const char *what)
{
    if (!ok) {
        check(false, what, "setup failed");
        exit(1);
    }
}

static double value(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return (double)((int)((*state >> 16) % 16) - 8) / 8.0;
}

// One problem: host copies (column-major, compact) and device buffers.
struct problem {
    int g;
    std::vector<double> a, b, c;
    void *da, *db, *dc;
};

template <typename T> static void *upload(const std::vector<double> &v)
{
    std::vector<T> t(v.begin(), v.end());
    void *d = NULL;
    must(cudaMalloc(&d, t.size() * sizeof(T)) == cudaSuccess, "cudaMalloc");
    must(cudaMemcpy(d, t.data(), t.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess,
         "upload");
    return d;
}

template <typename T> static std::vector<double> download(const void *d, size_t n)
{
    std::vector<T> t(n);
    must(cudaMemcpy(t.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess,
         "download");
    return std::vector<double>(t.begin(), t.end());
}

// op(A) is m x k: A is m x k (lda m) or, transposed, k x m (lda k).
static int lda_of(int g) { return TA[g] == CUBLAS_OP_N ? MS[g] : KS[g]; }

static void reference(const problem &p, std::vector<double> &ref, std::vector<double> &scale)
{
    int g = p.g, m = MS[g], n = NS[g], k = KS[g], lda = lda_of(g);
    ref.assign((size_t)m * n, 0);
    scale.assign(ref.size(), 0);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0, sc = 0;
            for (int l = 0; l < k; l++) {
                double a = TA[g] == CUBLAS_OP_N ? p.a[(size_t)l * lda + i] : p.a[(size_t)i * lda + l];
                s += a * p.b[(size_t)j * k + l];
                sc += fabs(a * p.b[(size_t)j * k + l]);
            }
            double c = p.c[(size_t)j * m + i];
            ref[(size_t)j * m + i] = ALPHA[g] * s + BETA[g] * c;
            scale[(size_t)j * m + i] = fabs(ALPHA[g]) * sc + fabs(BETA[g] * c);
        }
}

enum which { S, D, EX };

template <typename T> static void run(cublasHandle_t h, which w, const char *name)
{
    char buf[128];
    unsigned seed = 5 + (unsigned)w;
    std::vector<problem> ps;
    for (int g = 0; g < GROUPS; g++)
        for (int i = 0; i < SIZES[g]; i++) {
            problem p;
            p.g = g;
            p.a.resize((size_t)MS[g] * KS[g]);
            p.b.resize((size_t)KS[g] * NS[g]);
            p.c.resize((size_t)MS[g] * NS[g]);
            for (double &v : p.a) v = value(&seed);
            for (double &v : p.b) v = value(&seed);
            for (double &v : p.c) v = value(&seed);
            p.da = upload<T>(p.a);
            p.db = upload<T>(p.b);
            p.dc = upload<T>(p.c);
            ps.push_back(p);
        }
    std::vector<void *> pa, pb, pc;
    for (const problem &p : ps) {
        pa.push_back(p.da);
        pb.push_back(p.db);
        pc.push_back(p.dc);
    }
    void **da, **db, **dc;
    size_t bytes = ps.size() * sizeof(void *);
    must(cudaMalloc(&da, bytes) == cudaSuccess && cudaMalloc(&db, bytes) == cudaSuccess &&
             cudaMalloc(&dc, bytes) == cudaSuccess, "pointer arrays");
    must(cudaMemcpy(da, pa.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(db, pb.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(dc, pc.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess,
         "pointer arrays up");
    T alpha[GROUPS], beta[GROUPS];
    int lda[GROUPS], ldb[GROUPS], ldc[GROUPS];
    for (int g = 0; g < GROUPS; g++) {
        alpha[g] = (T)ALPHA[g];
        beta[g] = (T)BETA[g];
        lda[g] = lda_of(g);
        ldb[g] = KS[g];
        ldc[g] = MS[g];
    }
    cublasStatus_t s;
    if (w == S)
        s = cublasSgemmGroupedBatched(h, TA, TB, MS, NS, KS, (const float *)alpha,
                                      (const float *const *)da, lda, (const float *const *)db, ldb,
                                      (const float *)beta, (float *const *)dc, ldc, GROUPS, SIZES);
    else if (w == D)
        s = cublasDgemmGroupedBatched(h, TA, TB, MS, NS, KS, (const double *)alpha,
                                      (const double *const *)da, lda, (const double *const *)db,
                                      ldb, (const double *)beta, (double *const *)dc, ldc, GROUPS,
                                      SIZES);
    else
        s = cublasGemmGroupedBatchedEx(h, TA, TB, MS, NS, KS, alpha, (const void *const *)da,
                                       CUDA_R_32F, lda, (const void *const *)db, CUDA_R_32F, ldb,
                                       beta, (void *const *)dc, CUDA_R_32F, ldc, GROUPS, SIZES,
                                       CUBLAS_COMPUTE_32F_PEDANTIC);
    check(s == CUBLAS_STATUS_SUCCESS, fmt_name(buf, sizeof buf, "%s", name), "%s",
          cublasGetStatusName(s));
    for (size_t i = 0; i < ps.size(); i++) {
        std::vector<double> ref, scale;
        reference(ps[i], ref, scale);
        std::vector<double> got = download<T>(ps[i].dc, ref.size());
        size_t bad = 0, first = 0;
        for (size_t e = 0; e < ref.size(); e++)
            if (!(fabs(got[e] - ref[e]) <= 1e-4 * scale[e] + 1e-12) && !bad++)
                first = e;
        check(bad == 0, fmt_name(buf, sizeof buf, "%s problem %zu (group %d)", name, i, ps[i].g),
              "%zu wrong, first [%zu] %g want %g", bad, first, bad ? got[first] : 0.0,
              bad ? ref[first] : 0.0);
    }
    for (const problem &p : ps) {
        cudaFree(p.da);
        cudaFree(p.db);
        cudaFree(p.dc);
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
}

int main(void)
{
    cublasHandle_t h;
    must(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    run<float>(h, S, "sgemm grouped batched");
    run<double>(h, D, "dgemm grouped batched");
    run<float>(h, EX, "gemm grouped batched ex");
    cublasDestroy(h);
    return check_exit_status();
}

// cuBLASLt descriptors the way PyTorch uses them: created, set, asked the
// heuristics and destroyed around every matmul.  rgpu keeps matmul
// descriptors, layouts and preferences on the client and the server's
// descriptors by content (stubs/cublasLt_desc.c); this checks that it stays
// invisible: attributes read back as set, defaults as the library's, bad
// attributes and sizes refused with cuBLASLt's own status, results right
// through descriptor churn and through more distinct descriptors than rgpu
// keeps (from one thread, and from two at once), and the heuristics giving
// the same answer every time.
//
//   cublaslt [STEPS [churn]]   STEPS matmuls in the churn loop (default 20);
//                              "churn": only the attributes and the churn
//
// tests/lt-roundtrips.sh runs it with two STEPS under RGPU_STATS=1, churn
// only (two threads make how often descriptors are made vary): the extra
// steps must cost no round trip.  Computed values are never printed.
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <cublasLt.h>
#include "check.h"

// Each thread's own (test_threads runs matmuls from two at once).
static __thread cudaStream_t stream;
static __thread void *workspace;
static const size_t WS_SIZE = 1 << 20;

// Setup that must work for the rest to mean anything: report and stop.
static void must(bool ok, const char *what)
{
    if (!ok) {
        check(false, what, "setup failed");
        exit(1);
    }
}

// A call that must return exactly `want`; the ok line names the status so
// that the native/rgpu diff covers it.
static bool check_status(cublasStatus_t got, cublasStatus_t want, const char *name)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s -> %s", name, cublasLtGetStatusName(want));
    return check(got == want, buf, "got %s", cublasLtGetStatusName(got));
}

// ---- attributes -------------------------------------------------------------------------

// Reads a 4-byte attribute of a layout; -1 when the call fails.
static int64_t layout_i32(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr)
{
    int32_t v = 0;
    size_t written = 0;
    cublasStatus_t s = cublasLtMatrixLayoutGetAttribute(l, attr, &v, sizeof v, &written);
    return s == CUBLAS_STATUS_SUCCESS && written == sizeof v ? v : -1;
}

static void test_layout_attributes(void)
{
    cublasLtMatrixLayout_t l = NULL;
    must(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, 16, 12, 20) == CUBLAS_STATUS_SUCCESS,
         "cublasLtMatrixLayoutCreate");

    // Never set: the library's defaults and the create parameters.
    uint64_t rows = 0;
    int64_t ld = 0;
    size_t written = 0;
    check(layout_i32(l, CUBLASLT_MATRIX_LAYOUT_ORDER) == CUBLASLT_ORDER_COL,
          "layout ORDER unset reads CUBLASLT_ORDER_COL", "wrong");
    check(layout_i32(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) == 1,
          "layout BATCH_COUNT unset reads 1", "wrong");
    check(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows,
                                           &written) == CUBLAS_STATUS_SUCCESS &&
              rows == 16 && written == sizeof rows,
          "layout ROWS reads the create parameter", "wrong");
    check(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld, NULL) ==
                  CUBLAS_STATUS_SUCCESS && ld == 20,
          "layout LD reads the create parameter", "wrong");

    // Set, then read back; set again, the last value wins.
    int32_t batch = 3, order = CUBLASLT_ORDER_ROW;
    int64_t stride = 16 * 12;
    check_status(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                  sizeof batch),
                 CUBLAS_STATUS_SUCCESS, "layout set BATCH_COUNT");
    check_status(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                  &stride, sizeof stride),
                 CUBLAS_STATUS_SUCCESS, "layout set STRIDED_BATCH_OFFSET");
    batch = 5;
    check_status(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                  sizeof batch),
                 CUBLAS_STATUS_SUCCESS, "layout set BATCH_COUNT again");
    check_status(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &order,
                                                  sizeof order),
                 CUBLAS_STATUS_SUCCESS, "layout set ORDER");
    check(layout_i32(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) == 5,
          "layout BATCH_COUNT reads the last value set", "wrong");
    check(layout_i32(l, CUBLASLT_MATRIX_LAYOUT_ORDER) == CUBLASLT_ORDER_ROW,
          "layout ORDER reads the value set", "wrong");
    int64_t got_stride = 0;
    check(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                           &got_stride, sizeof got_stride, &written) ==
                  CUBLAS_STATUS_SUCCESS && got_stride == stride && written == sizeof stride,
          "layout STRIDED_BATCH_OFFSET reads the value set", "wrong");

    // Size queries: of a set attribute and of one never set.
    size_t need = 0;
    check(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, NULL, 0,
                                           &need) == CUBLAS_STATUS_SUCCESS && need == 4,
          "layout BATCH_COUNT size query says 4", "wrong");
    need = 0;
    check(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, NULL, 0,
                                           &need) == CUBLAS_STATUS_SUCCESS && need == 8,
          "layout PLANE_OFFSET size query says 8", "wrong");

    // What cuBLASLt refuses: wrong sizes, no buffer, unknown attributes.
    int32_t small = 7;
    int64_t big = 7;
    check_status(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &small,
                                                  sizeof small),
                 CUBLAS_STATUS_INVALID_VALUE, "layout set LD with 4 bytes");
    check_status(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &big,
                                                  sizeof big),
                 CUBLAS_STATUS_INVALID_VALUE, "layout set BATCH_COUNT with 8 bytes");
    check_status(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, NULL,
                                                  sizeof small),
                 CUBLAS_STATUS_INVALID_VALUE, "layout set BATCH_COUNT from NULL");
    check_status(cublasLtMatrixLayoutSetAttribute(l, (cublasLtMatrixLayoutAttribute_t)1000,
                                                  &small, sizeof small),
                 CUBLAS_STATUS_INVALID_VALUE, "layout set attribute 1000");
    check_status(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &big,
                                                  sizeof big, &written),
                 CUBLAS_STATUS_INVALID_VALUE, "layout get set BATCH_COUNT into 8 bytes");
    check_status(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, &small,
                                                  sizeof small, &written),
                 CUBLAS_STATUS_INVALID_VALUE, "layout get unset PLANE_OFFSET into 4 bytes");
    check_status(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, NULL, 0,
                                                  NULL),
                 CUBLAS_STATUS_INVALID_VALUE, "layout size query without sizeWritten");
    check_status(cublasLtMatrixLayoutGetAttribute(l, (cublasLtMatrixLayoutAttribute_t)1000,
                                                  &small, sizeof small, &written),
                 CUBLAS_STATUS_INVALID_VALUE, "layout get attribute 1000");
    // A refused set leaves the value as it was.
    check(layout_i32(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT) == 5,
          "layout BATCH_COUNT unchanged by refused sets", "wrong");
    check_status(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS, "layout destroy");
    check_status(cublasLtMatrixLayoutDestroy(NULL), CUBLAS_STATUS_SUCCESS,
                 "layout destroy NULL");
}

static void test_matmul_desc_attributes(void)
{
    cublasLtMatmulDesc_t op = NULL;
    must(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS,
         "cublasLtMatmulDescCreate");
    int32_t v = -1;
    size_t written = 0;
    check(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &v, sizeof v,
                                         &written) == CUBLAS_STATUS_SUCCESS &&
              v == CUBLAS_OP_N && written == sizeof v,
          "matmul desc TRANSA unset reads CUBLAS_OP_N", "wrong");
    v = -1;
    check(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &v, sizeof v,
                                         &written) == CUBLAS_STATUS_SUCCESS && v == CUDA_R_32F,
          "matmul desc SCALE_TYPE reads the create parameter", "wrong");
    v = -1;
    check(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &v, sizeof v,
                                         &written) == CUBLAS_STATUS_SUCCESS &&
              v == CUBLASLT_POINTER_MODE_HOST,
          "matmul desc POINTER_MODE unset reads HOST", "wrong");

    cublasOperation_t t = CUBLAS_OP_T;
    check_status(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t),
                 CUBLAS_STATUS_SUCCESS, "matmul desc set TRANSA");
    v = -1;
    check(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &v, sizeof v,
                                         &written) == CUBLAS_STATUS_SUCCESS && v == CUBLAS_OP_T,
          "matmul desc TRANSA reads the value set", "wrong");
    // Pointers read back as set (rgpu keeps them apart from the rest), an
    // unset one as NULL; nothing dereferences them here.
    const void *bias_set = (const void *)(uintptr_t)0x7f0012345600ull, *ptr = &v;
    check_status(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_set,
                                                sizeof bias_set),
                 CUBLAS_STATUS_SUCCESS, "matmul desc set BIAS_POINTER");
    check(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof ptr,
                                         &written) == CUBLAS_STATUS_SUCCESS &&
              ptr == bias_set && written == sizeof ptr,
          "matmul desc BIAS_POINTER reads the value set", "wrong");
    ptr = &v;
    check(cublasLtMatmulDescGetAttribute(op, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &ptr,
                                         sizeof ptr, &written) == CUBLAS_STATUS_SUCCESS &&
              ptr == NULL,
          "matmul desc AMAX_D_POINTER unset reads NULL", "wrong");
    check_status(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &v,
                                                sizeof v),
                 CUBLAS_STATUS_INVALID_VALUE, "matmul desc set BIAS_POINTER with 4 bytes");
    uint64_t epi64 = CUBLASLT_EPILOGUE_BIAS;
    check_status(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi64,
                                                sizeof epi64),
                 CUBLAS_STATUS_INVALID_VALUE, "matmul desc set EPILOGUE with 8 bytes");
    check_status(cublasLtMatmulDescSetAttribute(op, (cublasLtMatmulDescAttributes_t)1000, &v,
                                                sizeof v),
                 CUBLAS_STATUS_INVALID_VALUE, "matmul desc set attribute 1000");
    check_status(cublasLtMatmulDescDestroy(op), CUBLAS_STATUS_SUCCESS, "matmul desc destroy");
}

static void test_preference_attributes(void)
{
    cublasLtMatmulPreference_t pref = NULL;
    must(cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS,
         "cublasLtMatmulPreferenceCreate");
    uint64_t ws = 12345, got = 1;
    size_t written = 0;
    check(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &got, sizeof got, &written) ==
                  CUBLAS_STATUS_SUCCESS && got == 0 && written == sizeof got,
          "preference MAX_WORKSPACE_BYTES unset reads 0", "wrong");
    check_status(cublasLtMatmulPreferenceSetAttribute(
                     pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                 CUBLAS_STATUS_SUCCESS, "preference set MAX_WORKSPACE_BYTES");
    check(cublasLtMatmulPreferenceGetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                               &got, sizeof got, &written) ==
                  CUBLAS_STATUS_SUCCESS && got == ws,
          "preference MAX_WORKSPACE_BYTES reads the value set", "wrong");
    uint32_t small = 1;
    check_status(cublasLtMatmulPreferenceSetAttribute(
                     pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &small, sizeof small),
                 CUBLAS_STATUS_INVALID_VALUE, "preference set MAX_WORKSPACE_BYTES with 4 bytes");
    check_status(cublasLtMatmulPreferenceDestroy(pref), CUBLAS_STATUS_SUCCESS,
                 "preference destroy");
}

// ---- matmuls ------------------------------------------------------------------------------

// Deterministic inputs: multiples of 1/64 in [-1, 1), so every product and
// sum here is exact in fp32.
static std::vector<float> data(size_t n, unsigned seed)
{
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((int)((seed >> 16) % 128) - 64) / 64;
    }
    return v;
}

static float *to_dev(const std::vector<float> &h)
{
    float *d = NULL;
    must(cudaMalloc((void **)&d, h.size() * sizeof(float)) == cudaSuccess &&
             cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice) ==
                 cudaSuccess,
         "copy to device");
    return d;
}

// D (m x n) = alpha A B + bias, A m x k with leading dimension lda.  The
// bias is one of NBIAS vectors of other values (use_bias), as PyTorch's
// addmm under AMP hands cuBLASLt a new cast of the bias every step.
static const int NBIAS = 3;
struct Problem {
    int m, n, k, lda;
    std::vector<float> A, B, bias, biases[NBIAS];
    float *dA, *dB, *dbias, *dD, *dbiases[NBIAS];
};

static void use_bias(Problem *p, int i)
{
    p->bias = p->biases[i % NBIAS];
    p->dbias = p->dbiases[i % NBIAS];
}

static Problem make_problem(int m, int n, int k, int max_lda, unsigned seed)
{
    Problem p;
    p.m = m;
    p.n = n;
    p.k = k;
    p.lda = m;
    p.A = data((size_t)max_lda * k, seed);
    p.B = data((size_t)k * n, seed + 1);
    for (int i = 0; i < NBIAS; i++) {
        p.biases[i] = data(m, seed + 2 + 100 * i);
        p.dbiases[i] = to_dev(p.biases[i]);
    }
    use_bias(&p, 0);
    p.dA = to_dev(p.A);
    p.dB = to_dev(p.B);
    must(cudaMalloc((void **)&p.dD, (size_t)m * n * sizeof(float)) == cudaSuccess &&
             cudaMemset(p.dD, 0, (size_t)m * n * sizeof(float)) == cudaSuccess,
         "cudaMalloc D");
    return p;
}

static void free_problem(Problem *p)
{
    cudaFree(p->dA);
    cudaFree(p->dB);
    for (int i = 0; i < NBIAS; i++)
        cudaFree(p->dbiases[i]);
    cudaFree(p->dD);
}

// Whether D holds alpha A B + bias.
static bool result_right(const Problem &p, float alpha)
{
    std::vector<float> d((size_t)p.m * p.n);
    must(cudaStreamSynchronize(stream) == cudaSuccess &&
             cudaMemcpy(d.data(), p.dD, d.size() * sizeof(float), cudaMemcpyDeviceToHost) ==
                 cudaSuccess,
         "copy from device");
    for (int j = 0; j < p.n; j++)
        for (int i = 0; i < p.m; i++) {
            double ref = p.bias[i], mag = fabs(p.bias[i]);
            for (int l = 0; l < p.k; l++) {
                double t = (double)alpha * p.A[i + (size_t)l * p.lda] * p.B[l + (size_t)j * p.k];
                ref += t;
                mag += fabs(t);
            }
            if (fabs(d[i + (size_t)j * p.m] - ref) > 1e-4 * mag + 1e-30)
                return false;
        }
    return true;
}

struct Descs {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatmulPreference_t pref;
};

// What PyTorch does for a matmul with a bias: everything made afresh.
static cublasStatus_t make_descs(const Problem &p, Descs *ds)
{
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    cublasOperation_t n = CUBLAS_OP_N;
    uint64_t ws = WS_SIZE;
    memset(ds, 0, sizeof *ds);
    cublasStatus_t s = cublasLtMatmulDescCreate(&ds->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_TRANSA, &n, sizeof n);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                           sizeof epi);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(ds->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.dbias,
                                           sizeof p.dbias);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&ds->a, CUDA_R_32F, p.m, p.k, p.lda);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&ds->b, CUDA_R_32F, p.k, p.n, p.k);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&ds->d, CUDA_R_32F, p.m, p.n, p.m);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceCreate(&ds->pref);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(ds->pref,
                                                 CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                 sizeof ws);
    return s;
}

static void destroy_descs(Descs *ds)
{
    cublasLtMatmulPreferenceDestroy(ds->pref);
    cublasLtMatrixLayoutDestroy(ds->a);
    cublasLtMatrixLayoutDestroy(ds->b);
    cublasLtMatrixLayoutDestroy(ds->d);
    cublasLtMatmulDescDestroy(ds->op);
}

// One matmul with fresh descriptors (beta 0, C is D); *res: the heuristic's
// first answer.
static cublasStatus_t run(cublasLtHandle_t lt, const Problem &p, float alpha,
                          cublasLtMatmulHeuristicResult_t *res)
{
    Descs ds;
    float beta = 0;
    int count = 0;
    memset(res, 0, sizeof *res);
    cublasStatus_t s = make_descs(p, &ds);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt, ds.op, ds.a, ds.b, ds.d, ds.d, ds.pref, 1, res,
                                           &count);
    if (s == CUBLAS_STATUS_SUCCESS && count < 1)
        s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmul(lt, ds.op, &alpha, p.dA, ds.a, p.dB, ds.b, &beta, p.dD, ds.d, p.dD,
                           ds.d, &res->algo, workspace, WS_SIZE, stream);
    destroy_descs(&ds);
    return s;
}

static bool same_answer(const cublasLtMatmulHeuristicResult_t &a,
                        const cublasLtMatmulHeuristicResult_t &b)
{
    return memcmp(&a.algo, &b.algo, sizeof a.algo) == 0 && a.workspaceSize == b.workspaceSize &&
           a.state == b.state && a.wavesCount == b.wavesCount;
}

// Two shapes in turn, `steps` matmuls, a different alpha and another bias
// vector each step: every result right (so each matmul used its own bias),
// and the heuristics answer each shape the same every time.
static void test_churn(cublasLtHandle_t lt, int steps)
{
    Problem p[2] = { make_problem(32, 16, 24, 32, 1), make_problem(16, 8, 12, 16, 2) };
    cublasLtMatmulHeuristicResult_t first[2], res;
    int wrong = 0, failed = 0, other_answer = 0;
    for (int step = 0; step < steps; step++) {
        Problem &q = p[step % 2];
        float alpha = 1.0f + (float)(step % 4) / 2;
        use_bias(&q, step / 2);
        cublasStatus_t s = run(lt, q, alpha, step < 2 ? &first[step] : &res);
        if (s != CUBLAS_STATUS_SUCCESS) {
            failed++;
            continue;
        }
        if (step >= 2 && !same_answer(res, first[step % 2]))
            other_answer++;
        if (!result_right(q, alpha))
            wrong++;
    }
    check(failed == 0, "descriptor churn: every step succeeds", "%d steps failed", failed);
    check(wrong == 0, "descriptor churn: every result right", "%d results wrong", wrong);
    check(other_answer == 0, "descriptor churn: the heuristics answer the same every step",
          "%d other answers", other_answer);
    free_problem(&p[0]);
    free_problem(&p[1]);
}

// The same descriptors asked twice give the same answer, all of it.
static void test_heuristic_repeat(cublasLtHandle_t lt)
{
    Problem p = make_problem(24, 8, 16, 24, 3);
    Descs ds;
    cublasLtMatmulHeuristicResult_t r1[4], r2[4];
    int n1 = 0, n2 = 0;
    memset(r1, 0, sizeof r1);
    memset(r2, 0, sizeof r2);
    cublasStatus_t s = make_descs(p, &ds);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt, ds.op, ds.a, ds.b, ds.d, ds.d, ds.pref, 4, r1,
                                           &n1);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt, ds.op, ds.a, ds.b, ds.d, ds.d, ds.pref, 4, r2,
                                           &n2);
    bool same = s == CUBLAS_STATUS_SUCCESS && n1 >= 1 && n1 == n2;
    for (int i = 0; same && i < n1; i++)
        same = same_answer(r1[i], r2[i]);
    check(same, "heuristic asked twice answers the same", "%s, %d and %d results",
          cublasLtGetStatusName(s), n1, n2);
    destroy_descs(&ds);
    free_problem(&p);
}

// More distinct descriptors than rgpu keeps on the server (1024): each A
// layout has another leading dimension.  Then the first ones again, which
// rgpu must make anew.
static void test_many_layouts(cublasLtHandle_t lt)
{
    const int count = 1100, m = 16, n = 8, k = 12;
    Problem p = make_problem(m, n, k, m + 4 * count, 4);
    cublasLtMatmulHeuristicResult_t res;
    int failed = 0, wrong = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < (pass ? 8 : count); i++) {
            p.lda = m + 4 * i;
            float alpha = 1.0f + (float)(i % 3);
            if (run(lt, p, alpha, &res) != CUBLAS_STATUS_SUCCESS)
                failed++;
            else if (!result_right(p, alpha))
                wrong++;
        }
    }
    check(failed == 0, "1100 layouts: every matmul succeeds", "%d failed", failed);
    check(wrong == 0, "1100 layouts: every result right", "%d wrong", wrong);
    free_problem(&p);
}

// A matmul whose layouts contradict each other (D one row more than A)
// fails at the call, as natively, every time; the next good one works.
static void test_bad_matmul(cublasLtHandle_t lt)
{
    Problem p = make_problem(16, 8, 12, 16, 5);
    cublasLtMatmulHeuristicResult_t res;
    Descs ds;
    float alpha = 1, beta = 0;
    must(run(lt, p, alpha, &res) == CUBLAS_STATUS_SUCCESS, "matmul before the bad one");
    must(make_descs(p, &ds) == CUBLAS_STATUS_SUCCESS, "descriptors");
    cublasLtMatrixLayout_t taller = NULL;
    must(cublasLtMatrixLayoutCreate(&taller, CUDA_R_32F, p.m + 1, p.n, p.m + 1) ==
             CUBLAS_STATUS_SUCCESS, "layout");
    for (int i = 0; i < 2; i++)
        check_status(cublasLtMatmul(lt, ds.op, &alpha, p.dA, ds.a, p.dB, ds.b, &beta, p.dD,
                                    taller, p.dD, taller, &res.algo, workspace, WS_SIZE,
                                    stream),
                     CUBLAS_STATUS_INVALID_VALUE,
                     i ? "matmul with D taller than A again" : "matmul with D taller than A");
    cublasLtMatrixLayoutDestroy(taller);
    destroy_descs(&ds);
    check(run(lt, p, 2, &res) == CUBLAS_STATUS_SUCCESS && result_right(p, 2),
          "matmul after the bad ones right", "wrong");
    free_problem(&p);
}

// Two threads, each with its own handle, stream and 600 layouts: every
// descriptor one thread uses may be the oldest the other must make room
// against.
struct ThreadRun {
    int index, failed, wrong;
};

static void *thread_layouts(void *arg)
{
    ThreadRun *t = (ThreadRun *)arg;
    const int count = 600, m = 16, n = 8, k = 12;
    cublasLtMatmulHeuristicResult_t res;
    cublasLtHandle_t lt;
    must(cudaStreamCreate(&stream) == cudaSuccess &&
             cudaMalloc(&workspace, WS_SIZE) == cudaSuccess &&
             cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS,
         "thread handle, stream and workspace");
    Problem p = make_problem(m, n, k, m + 8 * count, 10 + t->index);
    for (int i = 0; i < count; i++) {
        p.lda = m + 8 * i + 4 * t->index;
        float alpha = 1.0f + (float)(i % 3);
        if (run(lt, p, alpha, &res) != CUBLAS_STATUS_SUCCESS)
            t->failed++;
        else if (!result_right(p, alpha))
            t->wrong++;
    }
    free_problem(&p);
    cublasLtDestroy(lt);
    cudaFree(workspace);
    cudaStreamDestroy(stream);
    return NULL;
}

static void test_threads(void)
{
    ThreadRun t[2] = { { 0, 0, 0 }, { 1, 0, 0 } };
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        must(pthread_create(&th[i], NULL, thread_layouts, &t[i]) == 0, "pthread_create");
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    check(t[0].failed + t[1].failed == 0, "two threads, 1200 layouts: every matmul succeeds",
          "%d failed", t[0].failed + t[1].failed);
    check(t[0].wrong + t[1].wrong == 0, "two threads, 1200 layouts: every result right",
          "%d wrong", t[0].wrong + t[1].wrong);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    bool churn_only = argc > 2 && strcmp(argv[2], "churn") == 0;
    cublasLtHandle_t lt;

    must(check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate"), "cudaStreamCreate");
    must(check_cuda(cudaMalloc(&workspace, WS_SIZE), "cudaMalloc workspace"), "workspace");
    must(check_status(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS, "cublasLtCreate"),
         "cublasLtCreate");
    test_layout_attributes();
    test_matmul_desc_attributes();
    test_preference_attributes();
    test_churn(lt, steps);
    test_heuristic_repeat(lt);
    if (!churn_only) {
        test_bad_matmul(lt);
        test_many_layouts(lt);
        test_threads();
    }
    check_status(cublasLtDestroy(lt), CUBLAS_STATUS_SUCCESS, "cublasLtDestroy");
    cudaFree(workspace);
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return check_exit_status();
}

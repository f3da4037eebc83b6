// What a training step asks again and again, the way PyTorch asks it, with
// results checked: rgpu answers these on the client after the first time
// (docs/architecture.md, "What the client answers itself").
//
//   - cuBLAS: stream, workspace and math mode set around every gemm, the
//     math mode asked inside it (PyTorch's reduced-precision guard);
//   - cuBLASLt: descriptors made, set and destroyed around every matmul,
//     the heuristics asked, and a bias vector at a new address every step
//     (PyTorch's addmm casts the bias anew each step under AMP);
//   - a kernel's attributes asked, the same attribute set again, occupancy
//     asked, and the kernel launched with the dynamic shared memory the
//     attribute allows;
//   - launches with attributes the client can check (Triton's programmatic
//     stream serialisation, a completion event) and the function handles
//     and names JAX asks for;
//   - device facts, through the runtime and the driver.
//
//   roundtrips [STEPS]        STEPS steps of each (default 20)
//
// Through rgpu it also writes to stderr, per part, how many requests
// waited for the server during the steps after the first (read through
// rgpu_stats_totals, exported by rgpu's client core):
//   "roundtrips: PART waited N"
// tests/roundtrips.sh fails when any N is not 0.  Natively there is no such
// line; stdout is the same either way (nothing but ok/FAIL lines).
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <cuda.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include "check.h"
#include "kernels.cuh"

static cudaStream_t stream;

// rgpu's totals of requests that waited for a reply and that did not.
typedef void (*totals_fn)(unsigned long long *, unsigned long long *);
static totals_fn totals;

static unsigned long long waited_so_far(void)
{
    unsigned long long w = 0;
    if (totals)
        totals(&w, NULL);
    return w;
}

static void report(const char *part, unsigned long long since)
{
    if (totals)
        fprintf(stderr, "roundtrips: %s waited %llu\n", part, waited_so_far() - since);
}

static void must(bool ok, const char *what)
{
    if (!ok) {
        check(false, what, "setup failed");
        exit(1);
    }
}

// Multiples of 1/64 in [-1, 1): products and sums are exact in fp32.
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

static std::vector<float> from_dev(const float *d, size_t n)
{
    std::vector<float> h(n);
    must(cudaStreamSynchronize(stream) == cudaSuccess &&
             cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess,
         "copy from device");
    return h;
}

// Whether d (m x n, column-major) is alpha A B + bias (bias may be NULL).
static bool gemm_right(const std::vector<float> &d, const std::vector<float> &A,
                       const std::vector<float> &B, const float *bias, int m, int n, int k,
                       float alpha)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double ref = bias ? bias[i] : 0, mag = fabs(ref);
            for (int l = 0; l < k; l++) {
                double t = (double)alpha * A[i + (size_t)l * m] * B[l + (size_t)j * k];
                ref += t;
                mag += fabs(t);
            }
            if (fabs(d[i + (size_t)j * m] - ref) > 1e-4 * mag + 1e-30)
                return false;
        }
    return true;
}

// ---- cuBLAS: PyTorch's handle setup and reduced-precision guard -------------------------

static void part_cublas(int steps)
{
    const int m = 16, n = 8, k = 12;
    const size_t WS = 1 << 20;
    std::vector<float> A = data((size_t)m * k, 1), B = data((size_t)k * n, 2);
    float *dA = to_dev(A), *dB = to_dev(B), *dC = NULL;
    void *ws = NULL;
    cublasHandle_t h;
    must(cudaMalloc((void **)&dC, (size_t)m * n * sizeof(float)) == cudaSuccess &&
             cudaMalloc(&ws, WS) == cudaSuccess && cublasCreate(&h) == CUBLAS_STATUS_SUCCESS,
         "cuBLAS setup");

    int failed = 0, other_mode = 0, other_stream = 0;
    unsigned long long since = 0;
    for (int step = 0; step < steps; step++) {
        if (step == 1)
            since = waited_so_far();
        float alpha = 1.0f + (float)(step % 3), beta = 0;
        cublasMath_t mode = CUBLAS_TF32_TENSOR_OP_MATH;
        cudaStream_t got_stream = NULL;
        cublasPointerMode_t pm = CUBLAS_POINTER_MODE_DEVICE;
        // getCurrentCUDABlasHandle: stream, workspace, math mode.
        failed += cublasSetStream(h, stream) != CUBLAS_STATUS_SUCCESS;
        failed += cublasSetWorkspace(h, ws, WS) != CUBLAS_STATUS_SUCCESS;
        failed += cublasSetMathMode(h, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS;
        // The guard: ask, disallow reduced-precision reductions, restore.
        failed += cublasGetMathMode(h, &mode) != CUBLAS_STATUS_SUCCESS;
        other_mode += mode != CUBLAS_DEFAULT_MATH;
        failed += cublasSetMathMode(h, (cublasMath_t)(mode |
                                                      CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) !=
                  CUBLAS_STATUS_SUCCESS;
        failed += cublasGetPointerMode(h, &pm) != CUBLAS_STATUS_SUCCESS;
        failed += cublasGetStream(h, &got_stream) != CUBLAS_STATUS_SUCCESS;
        other_stream += got_stream != stream || pm != CUBLAS_POINTER_MODE_HOST;
        failed += cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, dA, m, dB, k, &beta,
                              dC, m) != CUBLAS_STATUS_SUCCESS;
        failed += cublasSetMathMode(h, mode) != CUBLAS_STATUS_SUCCESS;
    }
    report("cublas", since);
    check(failed == 0, "cuBLAS: every set, get and gemm succeeds", "%d failed", failed);
    check(other_mode == 0, "cuBLAS: the math mode reads as last set", "%d wrong", other_mode);
    check(other_stream == 0, "cuBLAS: stream and pointer mode read as set", "%d wrong",
          other_stream);
    check(gemm_right(from_dev(dC, (size_t)m * n), A, B, NULL, m, n, k,
                     1.0f + (float)((steps - 1) % 3)),
          "cuBLAS: the last gemm's result is right", "wrong");

    // The guard's flag reads back with the mode; an atomics mode too.
    cublasMath_t mode = CUBLAS_DEFAULT_MATH;
    cublasAtomicsMode_t am = CUBLAS_ATOMICS_NOT_ALLOWED;
    check(cublasSetMathMode(h, (cublasMath_t)(CUBLAS_TF32_TENSOR_OP_MATH |
                                              CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) ==
                  CUBLAS_STATUS_SUCCESS &&
              cublasGetMathMode(h, &mode) == CUBLAS_STATUS_SUCCESS &&
              mode == (CUBLAS_TF32_TENSOR_OP_MATH |
                       CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION),
          "cuBLAS: TF32 with the disallow flag reads back", "mode %d", (int)mode);
    check(cublasSetAtomicsMode(h, CUBLAS_ATOMICS_ALLOWED) == CUBLAS_STATUS_SUCCESS &&
              cublasGetAtomicsMode(h, &am) == CUBLAS_STATUS_SUCCESS &&
              am == CUBLAS_ATOMICS_ALLOWED &&
              cublasSetAtomicsMode(h, CUBLAS_ATOMICS_NOT_ALLOWED) == CUBLAS_STATUS_SUCCESS &&
              cublasGetAtomicsMode(h, &am) == CUBLAS_STATUS_SUCCESS &&
              am == CUBLAS_ATOMICS_NOT_ALLOWED,
          "cuBLAS: the atomics mode reads as set", "mode %d", (int)am);
    check(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS, "cuBLAS: destroy", "failed");
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    cudaFree(ws);
}

// ---- cuBLASLt: addmm with a bias cast anew each step ---------------------------------------

static const int NBIAS = 4;

static cublasStatus_t lt_step(cublasLtHandle_t lt, int m, int n, int k, float alpha,
                              const float *dA, const float *dB, const float *dbias, float *dD,
                              void *ws, size_t ws_size)
{
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    uint64_t wsz = ws_size;
    uint32_t align = 256;
    float beta = 0;
    int count = 0;
    cublasStatus_t s = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dbias,
                                           sizeof dbias);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, m);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &wsz, sizeof wsz);
    // PyTorch states the alignment of each matrix (from its pointer).
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                 &align, sizeof align);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &res, &count);
    if (s == CUBLAS_STATUS_SUCCESS && count < 1)
        s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmul(lt, op, &alpha, dA, la, dB, lb, &beta, dD, ld, dD, ld, &res.algo, ws,
                           ws_size, stream);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    return s;
}

static void part_cublaslt(int steps)
{
    const int m = 32, n = 16, k = 24;
    const size_t WS = 1 << 20;
    std::vector<float> A = data((size_t)m * k, 3), B = data((size_t)k * n, 4), bias[NBIAS];
    float *dA = to_dev(A), *dB = to_dev(B), *dbias[NBIAS], *dD[NBIAS];
    void *ws = NULL;
    cublasLtHandle_t lt;
    for (int i = 0; i < NBIAS; i++) {
        bias[i] = data(m, 10 + i);
        dbias[i] = to_dev(bias[i]);
        must(cudaMalloc((void **)&dD[i], (size_t)m * n * sizeof(float)) == cudaSuccess,
             "cudaMalloc D");
    }
    must(cudaMalloc(&ws, WS) == cudaSuccess && cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS,
         "cuBLASLt setup");

    int failed = 0, wrong = 0;
    unsigned long long since = 0;
    for (int step = 0; step < steps; step++) {
        if (step == 1)
            since = waited_so_far();
        int b = step % NBIAS;
        failed += lt_step(lt, m, n, k, 1.0f + (float)b, dA, dB, dbias[b], dD[b], ws, WS) !=
                  CUBLAS_STATUS_SUCCESS;
    }
    report("cublasLt", since);
    // Each D holds the last product with its own bias.
    for (int b = 0; b < NBIAS && b < steps; b++)
        wrong += !gemm_right(from_dev(dD[b], (size_t)m * n), A, B, bias[b].data(), m, n, k,
                             1.0f + (float)b);
    check(failed == 0, "cuBLASLt: every step succeeds", "%d failed", failed);
    check(wrong == 0, "cuBLASLt: every result has its own bias", "%d wrong", wrong);
    cublasLtDestroy(lt);
    for (int i = 0; i < NBIAS; i++) {
        cudaFree(dbias[i]);
        cudaFree(dD[i]);
    }
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(ws);
}

// ---- launches with attributes the client can check ------------------------------------------

// What Triton's launcher sends (cuLaunchKernelEx with programmatic stream
// serialisation), a completion event to an event made for it, and the
// handles and names JAX asks for: none waits after the first step.
static void part_launch(int steps)
{
    const int n = 1 << 12;
    int *d = NULL;
    cudaEvent_t done;
    CUfunction f = NULL;
    const char *name = NULL;
    must(check_cuda(cudaMalloc(&d, n * sizeof(int)), "launch: cudaMalloc") &&
             check_cuda(cudaMemset(d, 0, n * sizeof(int)), "launch: cudaMemset") &&
             check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming),
                        "launch: untimed event"),
         "launch setup");
    cudaLaunchAttribute ra[2];
    memset(ra, 0, sizeof ra);
    ra[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    ra[0].val.programmaticStreamSerializationAllowed = 1;
    ra[1].id = cudaLaunchAttributePriority;
    cudaLaunchConfig_t rc = {};
    rc.gridDim = dim3(n / 256);
    rc.blockDim = dim3(256);
    rc.stream = stream;
    rc.attrs = ra;
    rc.numAttrs = 2;
    CUlaunchAttribute da[2];
    memset(da, 0, sizeof da);
    da[0].id = CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT;
    da[0].value.launchCompletionEvent.event = (CUevent)done;
    da[1].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    da[1].value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig dc = {};
    dc.gridDimX = n / 256;
    dc.gridDimY = dc.gridDimZ = 1;
    dc.blockDimX = 256;
    dc.blockDimY = dc.blockDimZ = 1;
    dc.hStream = (CUstream)stream;
    dc.attrs = da;
    dc.numAttrs = 2;

    int failed = 0, nn = n;
    void *params[] = {&d, &nn};
    unsigned long long since = 0;
    for (int step = 0; step < steps; step++) {
        if (step == 1)
            since = waited_so_far();
        failed += cudaLaunchKernelEx(&rc, k_inc, d, n) != cudaSuccess;
        failed += cudaGetFuncBySymbol(&f, (const void *)k_inc) != cudaSuccess;
        failed += cuFuncGetName(&name, f) != CUDA_SUCCESS || strcmp(name, "_Z5k_incPii") != 0;
        failed += cuLaunchKernelEx(&dc, f, params, NULL) != CUDA_SUCCESS;
    }
    report("launch", since);
    check(failed == 0, "launch: every launch and query succeeds", "%d failed", failed);
    check_cuda(cudaEventSynchronize(done), "launch: completion event synchronize");
    std::vector<int> got(n);
    check_cuda(cudaMemcpy(got.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost),
               "launch: copy back");
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += got[i] != 2 * steps;
    check(bad == 0, "launch: every launch ran", "%d wrong", bad);
    cudaEventDestroy(done);
    cudaFree(d);
}

// ---- a kernel's attributes and occupancy ----------------------------------------------------

static void part_kernel(int steps)
{
    const int n = 1 << 12, SMEM = 64 << 10;
    std::vector<float> x(n, 1.0f), y(n, 0.0f);
    float *dx = to_dev(x), *dy = to_dev(y);
    const void *fn = (const void *)k_axpy;
    struct cudaFuncAttributes a0, a;

    // Before the steps: what a set changes, and what a refused one keeps.
    check_cuda(cudaFuncGetAttributes(&a0, fn), "cudaFuncGetAttributes");
    check_cuda(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, 32 << 10),
               "cudaFuncSetAttribute 32 KiB");
    check(cudaFuncGetAttributes(&a, fn) == cudaSuccess && a.maxDynamicSharedSizeBytes == 32 << 10 &&
              a.numRegs == a0.numRegs,
          "the attribute reads as set", "%d", a.maxDynamicSharedSizeBytes);
    check_err(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 20),
              cudaErrorInvalidValue, "cudaFuncSetAttribute 64 MiB");
    check(cudaGetLastError() == cudaErrorInvalidValue, "the refused set is the last error",
          "another");
    check(cudaFuncGetAttributes(&a, fn) == cudaSuccess && a.maxDynamicSharedSizeBytes == 32 << 10,
          "a refused set leaves the attribute", "%d", a.maxDynamicSharedSizeBytes);

    int failed = 0, other = 0, first_blocks = -1, first_flags = -1;
    size_t first_avail = 0;
    unsigned long long since = 0;
    for (int step = 0; step < steps; step++) {
        if (step == 1)
            since = waited_so_far();
        int blocks = 0, blocks_flags = 0;
        size_t avail = 0;
        failed += cudaFuncGetAttributes(&a, fn) != cudaSuccess;
        other += a.numRegs != a0.numRegs || a.maxThreadsPerBlock != a0.maxThreadsPerBlock ||
                 (step > 0 && a.maxDynamicSharedSizeBytes != SMEM);
        failed += cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM) !=
                  cudaSuccess;
        failed += cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, 256, SMEM) !=
                  cudaSuccess;
        failed += cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                      &blocks_flags, fn, 128, 0, cudaOccupancyDisableCachingOverride) !=
                  cudaSuccess;
        failed += cudaOccupancyAvailableDynamicSMemPerBlock(&avail, fn, 2, 256) != cudaSuccess;
        if (step == 0) {
            first_blocks = blocks;
            first_flags = blocks_flags;
            first_avail = avail;
        }
        other += blocks != first_blocks || blocks_flags != first_flags || avail != first_avail;
        k_axpy<<<n / 256, 256, SMEM, stream>>>(1.0f, dx, dy, n);
        failed += cudaGetLastError() != cudaSuccess;
    }
    report("kernel", since);
    check(failed == 0, "kernel: every query, set and launch succeeds", "%d failed", failed);
    check(other == 0, "kernel: the same answers every step", "%d others", other);
    check(first_blocks > 0 && first_flags > 0, "kernel: occupancy above 0", "%d %d",
          first_blocks, first_flags);
    std::vector<float> got = from_dev(dy, n);
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += got[i] != (float)steps;
    check(bad == 0, "kernel: every launch ran", "%d wrong", bad);
    cudaFree(dx);
    cudaFree(dy);
}

// ---- device facts ----------------------------------------------------------------------

static void part_device(int steps)
{
    int failed = 0, other = 0, first[8] = { 0 };
    unsigned long long since = 0;
    for (int step = 0; step < steps; step++) {
        if (step == 1)
            since = waited_so_far();
        int dev = -1, least = 0, greatest = 0, sms = 0, cu_sms = 0, version = 0, count = 0;
        CUdevice cu_dev = -1;
        failed += cudaGetDevice(&dev) != cudaSuccess;
        failed += cudaDeviceGetStreamPriorityRange(&least, &greatest) != cudaSuccess;
        failed += cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) !=
                  cudaSuccess;
        failed += cuDeviceGet(&cu_dev, dev) != CUDA_SUCCESS;
        failed += cuDeviceGetAttribute(&cu_sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                       cu_dev) != CUDA_SUCCESS;
        failed += cuDriverGetVersion(&version) != CUDA_SUCCESS;
        failed += cuDeviceGetCount(&count) != CUDA_SUCCESS;
        int now[8] = { dev, least, greatest, sms, cu_sms, version, count, (int)cu_dev };
        if (step == 0)
            memcpy(first, now, sizeof first);
        other += memcmp(first, now, sizeof now) != 0 || sms != cu_sms;
    }
    report("device", since);
    check(failed == 0, "device: every query succeeds", "%d failed", failed);
    check(other == 0, "device: the same answers every step", "%d others", other);
    // One side may be asked for alone.
    int least = 1, greatest = 1;
    check(cudaDeviceGetStreamPriorityRange(NULL, &greatest) == cudaSuccess &&
              cudaDeviceGetStreamPriorityRange(&least, NULL) == cudaSuccess &&
              least == first[1] && greatest == first[2],
          "device: stream priorities asked one at a time", "%d %d", least, greatest);
}

// ---- cuDNN: tensor descriptors made, set and destroyed around each call ------------------

// What PyTorch does around a batch norm: three tensor descriptors created,
// set and destroyed each step, a size query, the (asynchronous) call.
static cudnnStatus_t bn_step(cudnnHandle_t h, const float *x, float *y, const float *sb,
                             float *mean, float *var, size_t *bytes)
{
    cudnnTensorDescriptor_t xd, yd, bnd;
    const float one = 1.0f, zero = 0.0f;
    cudnnStatus_t s;
    if ((s = cudnnCreateTensorDescriptor(&xd)) || (s = cudnnCreateTensorDescriptor(&yd)) ||
        (s = cudnnCreateTensorDescriptor(&bnd)))
        return s;
    int dims[] = { 2, 4, 3, 3 }, strides[] = { 36, 9, 3, 1 };
    if (!(s = cudnnSetTensorNdDescriptor(xd, CUDNN_DATA_FLOAT, 4, dims, strides)) &&
        !(s = cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 4, 3, 3)) &&
        !(s = cudnnSetTensor4dDescriptor(bnd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 4, 1, 1)) &&
        !(s = cudnnGetTensorSizeInBytes(xd, bytes)))
        s = cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x,
                                                   yd, y, bnd, sb, sb + 4, 0.0, mean, var, 1e-5,
                                                   NULL, NULL);
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyTensorDescriptor(bnd);
    return s;
}

static void part_cudnn(int steps)
{
    cudnnHandle_t h;
    std::vector<float> x = data(72, 3), sb(8, 1.0f), zeros(4, 0.0f), ones(4, 1.0f);
    float *dx = to_dev(x), *dsb = to_dev(sb), *dy = to_dev(std::vector<float>(72, 0.0f));
    float *mean = to_dev(zeros), *var = to_dev(ones);
    must(cudnnCreate(&h) == CUDNN_STATUS_SUCCESS && cudnnSetStream(h, stream) == CUDNN_STATUS_SUCCESS,
         "cudnnCreate");
    int failed = 0, other = 0;
    size_t bytes = 0;
    unsigned long long since = 0;
    std::vector<float> first;
    for (int step = 0; step < steps; step++) {
        if (step == 1)
            since = waited_so_far();
        failed += bn_step(h, dx, dy, dsb, mean, var, &bytes) != CUDNN_STATUS_SUCCESS;
        other += bytes != 72 * sizeof(float);
        if (step == 0)
            first = from_dev(dy, 72);
    }
    report("cudnn", since);
    check(failed == 0, "cudnn: every descriptor, query and batch norm succeeds", "%d failed",
          failed);
    check(other == 0, "cudnn: the size query answers 288 bytes", "%d others", other);
    check(from_dev(dy, 72) == first, "cudnn: the same output every step", "differs");
    cudnnTensorDescriptor_t d;
    int dims[] = { 2, 0, 3, 3 }, strides[] = { 18, 9, 3, 1 };
    check(cudnnCreateTensorDescriptor(&d) == CUDNN_STATUS_SUCCESS &&
              cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, 4, dims, strides) ==
                  CUDNN_STATUS_BAD_PARAM &&
              cudnnDestroyTensorDescriptor(d) == CUDNN_STATUS_SUCCESS,
          "cudnn: a zero dimension is refused at the set", "accepted");
    cudnnDestroy(h);
    cudaFree(dx);
    cudaFree(dsb);
    cudaFree(dy);
    cudaFree(mean);
    cudaFree(var);
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    totals = (totals_fn)dlsym(RTLD_DEFAULT, "rgpu_stats_totals");
    if (steps < 2)
        steps = 2;
    must(check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate"), "stream");
    part_cublas(steps);
    part_cublaslt(steps);
    part_kernel(steps);
    part_launch(steps);
    part_device(steps);
    part_cudnn(steps);
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return check_exit_status();
}

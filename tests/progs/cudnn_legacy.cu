// cuDNN's legacy API through rgpu: handle and stream, tensor, filter,
// convolution and activation descriptors (set and read back, 4d and Nd),
// convolution forward (padding, stride, dilation, both modes, alpha/beta),
// backward data, backward filter and backward bias with the algorithm
// queries (Get_v7 and Find) and workspace sizes, add-tensor, activation,
// softmax, and batch normalization (forward training and inference,
// backward).  Each result is checked against a CPU reference computed in
// double.
//
// Tolerance, per element: |got - ref| <= 1e-4 * (scale + 1), where scale is
// the sum of the magnitudes of the terms (|alpha| sum |x w| + |beta y| for
// convolutions) or |ref| elsewhere.  The convolutions use CUDNN_FMA_MATH,
// so no TF32; their inputs are multiples of 1/8 in [-1, 1], so every
// product and sum is exact in fp32 whatever order the GPU sums in, and only
// FFT or Winograd algorithms round at all.  The algorithm queries print
// only that one succeeding algorithm came back: the ids, times and
// workspace sizes differ between GPUs.  Computed values are never printed:
// the output must be identical natively and through rgpu.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <cudnn.h>
#include "check.h"

static const double TOL = 1e-4;
static cudaStream_t stream;

static bool check_dnn(cudnnStatus_t s, const char *name)
{
    return check(s == CUDNN_STATUS_SUCCESS, name, "%s", cudnnGetErrorString(s));
}

// A call that must return exactly `want`; the ok line names the status.
static bool check_dnn_err(cudnnStatus_t got, cudnnStatus_t want, const char *name)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s -> %s", name, cudnnGetErrorString(want));
    return check(got == want, buf, "got %s", cudnnGetErrorString(got));
}

// Setup that must work for the rest to mean anything: report and stop.
static void must(bool ok, const char *what)
{
    if (!ok) {
        check(false, what, "setup failed");
        exit(1);
    }
}

// Deterministic inputs: multiples of 1/8 in [-1, 1].
static std::vector<float> data(size_t n, unsigned seed)
{
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((int)((seed >> 16) % 17) - 8) / 8;
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

// Reads n floats back; waits for the stream first.
static std::vector<float> from_dev(const float *d, size_t n)
{
    std::vector<float> h(n);
    must(cudaStreamSynchronize(stream) == cudaSuccess &&
             cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess,
         "copy from device");
    return h;
}

// Fills n floats with NaNs: outputs with beta == 0 must not read them.
static void poison(float *d, size_t n)
{
    must(cudaMemset(d, 0xff, n * sizeof(float)) == cudaSuccess, "cudaMemset");
}

// Whether got matches ref within TOL * (scale + 1); prints the check line.
static bool matches(const char *name, const std::vector<float> &got, const std::vector<double> &ref,
                    const std::vector<double> &scale)
{
    for (size_t i = 0; i < ref.size(); i++) {
        double err = fabs((double)got[i] - ref[i]);
        if (!(err <= TOL * (scale[i] + 1)))        // NaN fails too
            return check(false, name, "element %zu outside the tolerance", i);
    }
    return check(true, name, " ");
}

static std::vector<double> magnitudes(const std::vector<double> &ref)
{
    std::vector<double> m(ref.size());
    for (size_t i = 0; i < ref.size(); i++)
        m[i] = fabs(ref[i]);
    return m;
}

// ---- Shapes -------------------------------------------------------------------------------------

// The convolution of the tests: x N x C x H x W, w K x C x R x S, padding
// (1, 2), stride (2, 1), dilation (1, 2): y N x K x 5 x 9.
enum { N = 2, C = 3, H = 9, W = 9, K = 4, R = 3, S = 3 };
static const int PAD[2] = {1, 2}, STR[2] = {2, 1}, DIL[2] = {1, 2};
static const int P = 1 + (H + 2 * PAD[0] - ((R - 1) * DIL[0] + 1)) / STR[0];
static const int Q = 1 + (W + 2 * PAD[1] - ((S - 1) * DIL[1] + 1)) / STR[1];

static size_t xi(int n, int c, int h, int w) { return (((size_t)n * C + c) * H + h) * W + w; }
static size_t wi(int k, int c, int r, int s) { return (((size_t)k * C + c) * R + r) * S + s; }
static size_t yi(int n, int k, int p, int q) { return (((size_t)n * K + k) * P + p) * Q + q; }

// Calls fn(x index, w index, y index) for every product of the
// convolution; flip: CUDNN_CONVOLUTION (the filter reversed).
template <typename F>
static void conv_terms(bool flip, F fn)
{
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++)
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++)
                            for (int s = 0; s < S; s++) {
                                int h = p * STR[0] - PAD[0] + r * DIL[0];
                                int w = q * STR[1] - PAD[1] + s * DIL[1];
                                if (h < 0 || h >= H || w < 0 || w >= W)
                                    continue;
                                size_t wk = flip ? wi(k, c, R - 1 - r, S - 1 - s) : wi(k, c, r, s);
                                fn(xi(n, c, h, w), wk, yi(n, k, p, q));
                            }
}

// ---- Descriptors --------------------------------------------------------------------------------

struct conv_descs {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
};

// 4d setters (nd: the Nd ones) with the math type set to FMA (no TF32).
static conv_descs make_descs(bool nd, cudnnConvolutionMode_t mode)
{
    conv_descs d;
    must(cudnnCreateTensorDescriptor(&d.x) == CUDNN_STATUS_SUCCESS &&
             cudnnCreateTensorDescriptor(&d.y) == CUDNN_STATUS_SUCCESS &&
             cudnnCreateFilterDescriptor(&d.w) == CUDNN_STATUS_SUCCESS &&
             cudnnCreateConvolutionDescriptor(&d.conv) == CUDNN_STATUS_SUCCESS,
         "create descriptors");
    if (nd) {
        int xd[4] = {N, C, H, W}, xs[4] = {C * H * W, H * W, W, 1};
        int yd[4] = {N, K, P, Q}, ys[4] = {K * P * Q, P * Q, Q, 1};
        int wd[4] = {K, C, R, S};
        must(cudnnSetTensorNdDescriptor(d.x, CUDNN_DATA_FLOAT, 4, xd, xs) == CUDNN_STATUS_SUCCESS &&
                 cudnnSetTensorNdDescriptor(d.y, CUDNN_DATA_FLOAT, 4, yd, ys) == CUDNN_STATUS_SUCCESS &&
                 cudnnSetFilterNdDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, wd) ==
                     CUDNN_STATUS_SUCCESS &&
                 cudnnSetConvolutionNdDescriptor(d.conv, 2, PAD, STR, DIL, mode, CUDNN_DATA_FLOAT) ==
                     CUDNN_STATUS_SUCCESS,
             "set Nd descriptors");
    } else {
        must(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, C, H, W) ==
                     CUDNN_STATUS_SUCCESS &&
                 cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, N, K, P, Q) ==
                     CUDNN_STATUS_SUCCESS &&
                 cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, K, C, R, S) ==
                     CUDNN_STATUS_SUCCESS &&
                 cudnnSetConvolution2dDescriptor(d.conv, PAD[0], PAD[1], STR[0], STR[1], DIL[0],
                                                 DIL[1], mode, CUDNN_DATA_FLOAT) ==
                     CUDNN_STATUS_SUCCESS,
             "set 4d descriptors");
    }
    must(cudnnSetConvolutionMathType(d.conv, CUDNN_FMA_MATH) == CUDNN_STATUS_SUCCESS,
         "cudnnSetConvolutionMathType");
    return d;
}

static void free_descs(conv_descs &d, const char *name)
{
    cudnnStatus_t s = cudnnDestroyTensorDescriptor(d.x);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnDestroyTensorDescriptor(d.y);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnDestroyFilterDescriptor(d.w);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnDestroyConvolutionDescriptor(d.conv);
    check_dnn(s, name);
}

static void test_versions(void)
{
    size_t v = cudnnGetVersion();
    check(v >= 90000 && v < 100000, "cudnnGetVersion is 9.x", "%zu", v);
    int major = 0;
    cudnnStatus_t s = cudnnGetProperty(MAJOR_VERSION, &major);
    check(s == CUDNN_STATUS_SUCCESS && major == 9, "cudnnGetProperty MAJOR_VERSION is 9", "%s %d",
          cudnnGetErrorString(s), major);
    const char *e = cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM);
    check(e && strcmp(e, "CUDNN_STATUS_BAD_PARAM") == 0, "cudnnGetErrorString BAD_PARAM", "%s",
          e ? e : "(null)");
}

static void test_descriptors(void)
{
    conv_descs d = make_descs(false, CUDNN_CROSS_CORRELATION);

    cudnnDataType_t t;
    int n, c, h, w, ns, cs, hs, ws;
    cudnnStatus_t s = cudnnGetTensor4dDescriptor(d.x, &t, &n, &c, &h, &w, &ns, &cs, &hs, &ws);
    check(s == CUDNN_STATUS_SUCCESS && t == CUDNN_DATA_FLOAT && n == N && c == C && h == H &&
              w == W && ns == C * H * W && cs == H * W && hs == W && ws == 1,
          "cudnnGetTensor4dDescriptor NCHW", "%s", cudnnGetErrorString(s));

    cudnnTensorDescriptor_t nhwc;
    int dims[8] = {0}, strides[8] = {0}, nb = 0;
    must(cudnnCreateTensorDescriptor(&nhwc) == CUDNN_STATUS_SUCCESS, "create tensor");
    s = cudnnSetTensor4dDescriptor(nhwc, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, 2, 3, 4, 5);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetTensorNdDescriptor(nhwc, 8, &t, &nb, dims, strides);
    check(s == CUDNN_STATUS_SUCCESS && nb == 4 && dims[0] == 2 && dims[1] == 3 && dims[2] == 4 &&
              dims[3] == 5 && strides[0] == 60 && strides[1] == 1 && strides[2] == 15 &&
              strides[3] == 3,
          "cudnnGetTensorNdDescriptor NHWC strides", "%s nb %d", cudnnGetErrorString(s), nb);
    size_t bytes = 0;
    s = cudnnGetTensorSizeInBytes(nhwc, &bytes);
    check(s == CUDNN_STATUS_SUCCESS && bytes == 2 * 3 * 4 * 5 * sizeof(float),
          "cudnnGetTensorSizeInBytes", "%s %zu", cudnnGetErrorString(s), bytes);
    // Fewer dimensions requested than the tensor has: only those written.
    int few[8] = {-1, -1, -1, -1, -1, -1, -1, -1}, fs[8] = {0};
    s = cudnnGetTensorNdDescriptor(nhwc, 2, &t, &nb, few, fs);
    check(s == CUDNN_STATUS_SUCCESS && nb == 4 && few[0] == 2 && few[1] == 3 && few[2] == -1,
          "cudnnGetTensorNdDescriptor 2 of 4 dims", "%s nb %d", cudnnGetErrorString(s), nb);
    check_dnn(cudnnDestroyTensorDescriptor(nhwc), "cudnnDestroyTensorDescriptor");

    cudnnTensorFormat_t f;
    int k;
    s = cudnnGetFilter4dDescriptor(d.w, &t, &f, &k, &c, &h, &w);
    check(s == CUDNN_STATUS_SUCCESS && t == CUDNN_DATA_FLOAT && f == CUDNN_TENSOR_NCHW &&
              k == K && c == C && h == R && w == S,
          "cudnnGetFilter4dDescriptor", "%s", cudnnGetErrorString(s));

    int ph, pw, u, v, dh, dw;
    cudnnConvolutionMode_t mode;
    s = cudnnGetConvolution2dDescriptor(d.conv, &ph, &pw, &u, &v, &dh, &dw, &mode, &t);
    check(s == CUDNN_STATUS_SUCCESS && ph == PAD[0] && pw == PAD[1] && u == STR[0] &&
              v == STR[1] && dh == DIL[0] && dw == DIL[1] && mode == CUDNN_CROSS_CORRELATION &&
              t == CUDNN_DATA_FLOAT,
          "cudnnGetConvolution2dDescriptor", "%s", cudnnGetErrorString(s));
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    s = cudnnGetConvolutionMathType(d.conv, &math);
    check(s == CUDNN_STATUS_SUCCESS && math == CUDNN_FMA_MATH, "cudnnGetConvolutionMathType FMA",
          "%s %d", cudnnGetErrorString(s), (int)math);
    int groups = 0;
    s = cudnnGetConvolutionGroupCount(d.conv, &groups);
    check(s == CUDNN_STATUS_SUCCESS && groups == 1, "cudnnGetConvolutionGroupCount 1", "%s %d",
          cudnnGetErrorString(s), groups);

    int out[4] = {0};
    s = cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &out[0], &out[1], &out[2], &out[3]);
    check(s == CUDNN_STATUS_SUCCESS && out[0] == N && out[1] == K && out[2] == P && out[3] == Q,
          "cudnnGetConvolution2dForwardOutputDim", "%s %d %d %d %d", cudnnGetErrorString(s),
          out[0], out[1], out[2], out[3]);
    int outnd[4] = {0};
    s = cudnnGetConvolutionNdForwardOutputDim(d.conv, d.x, d.w, 4, outnd);
    check(s == CUDNN_STATUS_SUCCESS && memcmp(out, outnd, sizeof out) == 0,
          "cudnnGetConvolutionNdForwardOutputDim", "%s", cudnnGetErrorString(s));

    // Errors of synchronous calls (the same natively and through rgpu).
    check_dnn_err(cudnnSetConvolution2dDescriptor(d.conv, 0, 0, 0, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                                  CUDNN_DATA_FLOAT),
                  CUDNN_STATUS_BAD_PARAM, "cudnnSetConvolution2dDescriptor stride 0");
    check_dnn_err(cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 0, 1, 1, 1),
                  CUDNN_STATUS_BAD_PARAM, "cudnnSetTensor4dDescriptor n 0");
    cudnnConvolutionDescriptor_t fresh;
    must(cudnnCreateConvolutionDescriptor(&fresh) == CUDNN_STATUS_SUCCESS, "create conv");
    check_dnn_err(cudnnGetConvolution2dForwardOutputDim(fresh, d.x, d.w, &out[0], &out[1], &out[2],
                                                        &out[3]),
                  CUDNN_STATUS_BAD_PARAM, "cudnnGetConvolution2dForwardOutputDim unset descriptor");
    check_dnn(cudnnDestroyConvolutionDescriptor(fresh), "cudnnDestroyConvolutionDescriptor");

    conv_descs e = make_descs(true, CUDNN_CONVOLUTION);
    int len = 0, pads[4] = {0}, strs[4] = {0}, dils[4] = {0};
    s = cudnnGetConvolutionNdDescriptor(e.conv, 4, &len, pads, strs, dils, &mode, &t);
    check(s == CUDNN_STATUS_SUCCESS && len == 2 && pads[0] == PAD[0] && pads[1] == PAD[1] &&
              strs[0] == STR[0] && strs[1] == STR[1] && dils[0] == DIL[0] && dils[1] == DIL[1] &&
              mode == CUDNN_CONVOLUTION,
          "cudnnGetConvolutionNdDescriptor", "%s len %d", cudnnGetErrorString(s), len);
    int fd[8] = {0};
    s = cudnnGetFilterNdDescriptor(e.w, 8, &t, &f, &nb, fd);
    check(s == CUDNN_STATUS_SUCCESS && nb == 4 && fd[0] == K && fd[1] == C && fd[2] == R &&
              fd[3] == S,
          "cudnnGetFilterNdDescriptor", "%s nb %d", cudnnGetErrorString(s), nb);
    free_descs(e, "destroy Nd descriptors");
    free_descs(d, "destroy 4d descriptors");
}

// ---- Convolution ----------------------------------------------------------------------------------

// The first algorithm of a perf array that succeeded; checks the query.
template <typename Perf>
static int first_ok(cudnnStatus_t s, int returned, const Perf *perf, const char *name)
{
    int found = -1;
    for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < returned && found < 0; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS)
            found = i;
    check(s == CUDNN_STATUS_SUCCESS && returned >= 1 && found >= 0, name, "%s, %d returned",
          cudnnGetErrorString(s), returned);
    return found < 0 ? 0 : (int)perf[found].algo;
}

static void *workspace(size_t bytes)
{
    void *p = NULL;
    if (bytes)
        must(cudaMalloc(&p, bytes) == cudaSuccess, "cudaMalloc workspace");
    return p;
}

static void test_conv(cudnnHandle_t h)
{
    conv_descs d = make_descs(false, CUDNN_CROSS_CORRELATION);
    std::vector<float> x = data((size_t)N * C * H * W, 1), w = data((size_t)K * C * R * S, 2);
    std::vector<float> dy = data((size_t)N * K * P * Q, 3);
    float *dx_d = to_dev(x), *dw_d = to_dev(w), *ddy_d = to_dev(dy);
    float *y_d = NULL, *gx_d = NULL, *gw_d = NULL, *db_d = NULL;
    float one = 1, zero = 0;
    must(cudaMalloc((void **)&y_d, dy.size() * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&gx_d, x.size() * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&gw_d, w.size() * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&db_d, K * sizeof(float)) == cudaSuccess,
         "cudaMalloc conv outputs");

    // Forward: the heuristics' and the benchmark's choices.
    int max = 0;
    cudnnStatus_t s = cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max);
    check(s == CUDNN_STATUS_SUCCESS && max >= 1, "cudnnGetConvolutionForwardAlgorithmMaxCount >= 1",
          "%s %d", cudnnGetErrorString(s), max);
    cudnnConvolutionFwdAlgoPerf_t fperf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    s = cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y,
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, fperf);
    cudnnConvolutionFwdAlgo_t falgo = (cudnnConvolutionFwdAlgo_t)first_ok(
        s, returned, fperf, "cudnnGetConvolutionForwardAlgorithm_v7 returns a succeeding algo");
    returned = 0;
    s = cudnnFindConvolutionForwardAlgorithm(h, d.x, d.w, d.conv, d.y,
                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, fperf);
    first_ok(s, returned, fperf, "cudnnFindConvolutionForwardAlgorithm returns a succeeding algo");
    size_t ws_bytes = 0;
    s = cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, falgo, &ws_bytes);
    check_dnn(s, "cudnnGetConvolutionForwardWorkspaceSize");
    void *ws = workspace(ws_bytes);

    std::vector<double> ref(dy.size(), 0), mag(dy.size(), 0);
    conv_terms(false, [&](size_t a, size_t b, size_t c) {
        ref[c] += (double)x[a] * w[b];
        mag[c] += fabs((double)x[a] * w[b]);
    });
    poison(y_d, dy.size());
    s = cudnnConvolutionForward(h, &one, d.x, dx_d, d.w, dw_d, d.conv, falgo, ws, ws_bytes, &zero,
                                d.y, y_d);
    if (check_dnn(s, "cudnnConvolutionForward pad/stride/dilation"))
        matches("cudnnConvolutionForward result (beta 0 over NaNs)", from_dev(y_d, dy.size()), ref,
                mag);
    cudaFree(ws);

    // Backward data.
    cudnnConvolutionBwdDataAlgoPerf_t dperf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    returned = 0;
    s = cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x,
                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                    &returned, dperf);
    cudnnConvolutionBwdDataAlgo_t dalgo = (cudnnConvolutionBwdDataAlgo_t)first_ok(
        s, returned, dperf, "cudnnGetConvolutionBackwardDataAlgorithm_v7 returns a succeeding algo");
    returned = 0;
    s = cudnnFindConvolutionBackwardDataAlgorithm(h, d.w, d.y, d.conv, d.x,
                                                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned,
                                                  dperf);
    first_ok(s, returned, dperf, "cudnnFindConvolutionBackwardDataAlgorithm returns a succeeding algo");
    ws_bytes = 0;
    s = cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, dalgo, &ws_bytes);
    check_dnn(s, "cudnnGetConvolutionBackwardDataWorkspaceSize");
    ws = workspace(ws_bytes);
    std::vector<double> gx(x.size(), 0), gxm(x.size(), 0);
    conv_terms(false, [&](size_t a, size_t b, size_t c) {
        gx[a] += (double)dy[c] * w[b];
        gxm[a] += fabs((double)dy[c] * w[b]);
    });
    poison(gx_d, x.size());
    s = cudnnConvolutionBackwardData(h, &one, d.w, dw_d, d.y, ddy_d, d.conv, dalgo, ws, ws_bytes,
                                     &zero, d.x, gx_d);
    if (check_dnn(s, "cudnnConvolutionBackwardData"))
        matches("cudnnConvolutionBackwardData result", from_dev(gx_d, x.size()), gx, gxm);
    cudaFree(ws);

    // Backward filter, accumulating: dw = 1 * grad + 1 * dw.
    cudnnConvolutionBwdFilterAlgoPerf_t wperf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    returned = 0;
    s = cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                      &returned, wperf);
    cudnnConvolutionBwdFilterAlgo_t walgo = (cudnnConvolutionBwdFilterAlgo_t)first_ok(
        s, returned, wperf,
        "cudnnGetConvolutionBackwardFilterAlgorithm_v7 returns a succeeding algo");
    returned = 0;
    s = cudnnFindConvolutionBackwardFilterAlgorithm(h, d.x, d.y, d.conv, d.w,
                                                    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                    &returned, wperf);
    first_ok(s, returned, wperf,
             "cudnnFindConvolutionBackwardFilterAlgorithm returns a succeeding algo");
    ws_bytes = 0;
    s = cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, walgo, &ws_bytes);
    check_dnn(s, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
    ws = workspace(ws_bytes);
    std::vector<float> w0 = data(w.size(), 4);
    must(cudaMemcpy(gw_d, w0.data(), w0.size() * sizeof(float), cudaMemcpyHostToDevice) ==
             cudaSuccess,
         "copy dw");
    std::vector<double> gw(w.size()), gwm(w.size());
    for (size_t i = 0; i < w.size(); i++) {
        gw[i] = w0[i];
        gwm[i] = fabs(w0[i]);
    }
    conv_terms(false, [&](size_t a, size_t b, size_t c) {
        gw[b] += (double)dy[c] * x[a];
        gwm[b] += fabs((double)dy[c] * x[a]);
    });
    s = cudnnConvolutionBackwardFilter(h, &one, d.x, dx_d, d.y, ddy_d, d.conv, walgo, ws, ws_bytes,
                                       &one, d.w, gw_d);
    if (check_dnn(s, "cudnnConvolutionBackwardFilter beta 1"))
        matches("cudnnConvolutionBackwardFilter result", from_dev(gw_d, w.size()), gw, gwm);
    cudaFree(ws);

    // Backward bias into 1 x K x 1 x 1.
    cudnnTensorDescriptor_t bd;
    must(cudnnCreateTensorDescriptor(&bd) == CUDNN_STATUS_SUCCESS &&
             cudnnSetTensor4dDescriptor(bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, K, 1, 1) ==
                 CUDNN_STATUS_SUCCESS,
         "bias descriptor");
    std::vector<double> gb(K, 0), gbm(K, 0);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    gb[k] += dy[yi(n, k, p, q)];
                    gbm[k] += fabs(dy[yi(n, k, p, q)]);
                }
    poison(db_d, K);
    s = cudnnConvolutionBackwardBias(h, &one, d.y, ddy_d, &zero, bd, db_d);
    if (check_dnn(s, "cudnnConvolutionBackwardBias"))
        matches("cudnnConvolutionBackwardBias result", from_dev(db_d, K), gb, gbm);
    check_dnn(cudnnDestroyTensorDescriptor(bd), "destroy bias descriptor");
    free_descs(d, "destroy conv descriptors");

    // CUDNN_CONVOLUTION (flipped filter) from Nd descriptors, with
    // y = 0.5 conv + 0.25 y, with IMPLICIT_GEMM.
    conv_descs e = make_descs(true, CUDNN_CONVOLUTION);
    std::vector<float> y0 = data(dy.size(), 5);
    must(cudaMemcpy(y_d, y0.data(), y0.size() * sizeof(float), cudaMemcpyHostToDevice) ==
             cudaSuccess,
         "copy y");
    float half = 0.5f, quarter = 0.25f;
    for (size_t i = 0; i < ref.size(); i++) {
        ref[i] = 0.25 * y0[i];
        mag[i] = fabs(0.25 * y0[i]);
    }
    conv_terms(true, [&](size_t a, size_t b, size_t c) {
        ref[c] += 0.5 * x[a] * w[b];
        mag[c] += fabs(0.5 * x[a] * w[b]);
    });
    ws_bytes = 0;
    s = cudnnGetConvolutionForwardWorkspaceSize(h, e.x, e.w, e.conv, e.y,
                                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, &ws_bytes);
    check_dnn(s, "cudnnGetConvolutionForwardWorkspaceSize IMPLICIT_GEMM");
    ws = workspace(ws_bytes);
    s = cudnnConvolutionForward(h, &half, e.x, dx_d, e.w, dw_d, e.conv,
                                CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, ws, ws_bytes, &quarter,
                                e.y, y_d);
    if (check_dnn(s, "cudnnConvolutionForward CUDNN_CONVOLUTION alpha 0.5 beta 0.25"))
        matches("cudnnConvolutionForward CUDNN_CONVOLUTION result", from_dev(y_d, dy.size()), ref,
                mag);
    cudaFree(ws);
    free_descs(e, "destroy Nd conv descriptors");

    cudaFree(dx_d);
    cudaFree(dw_d);
    cudaFree(ddy_d);
    cudaFree(y_d);
    cudaFree(gx_d);
    cudaFree(gw_d);
    cudaFree(db_d);
}

// ---- Element-wise -----------------------------------------------------------------------------------

static cudnnTensorDescriptor_t tensor4d(int n, int c, int h, int w)
{
    cudnnTensorDescriptor_t t;
    must(cudnnCreateTensorDescriptor(&t) == CUDNN_STATUS_SUCCESS &&
             cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w) ==
                 CUDNN_STATUS_SUCCESS,
         "tensor descriptor");
    return t;
}

static void test_elementwise(cudnnHandle_t h)
{
    const int n = 2, c = 4, hh = 3, ww = 5, total = n * c * hh * ww;
    cudnnTensorDescriptor_t td = tensor4d(n, c, hh, ww), bd = tensor4d(1, c, 1, 1);
    std::vector<float> x = data(total, 11), y0 = data(total, 12), b = data(c, 13);
    float *x_d = to_dev(x), *y_d = to_dev(y0), *b_d = to_dev(b);
    std::vector<double> ref(total);
    float one = 1, two = 2, half = 0.5f, zero = 0;

    // AddTensor, bias broadcast over N, H, W: C = 2 bias + 0.5 C.
    for (int i = 0; i < total; i++)
        ref[i] = 2.0 * b[(i / (hh * ww)) % c] + 0.5 * y0[i];
    cudnnStatus_t s = cudnnAddTensor(h, &two, bd, b_d, &half, td, y_d);
    if (check_dnn(s, "cudnnAddTensor 1xCx1x1 bias"))
        matches("cudnnAddTensor result", from_dev(y_d, total), ref, magnitudes(ref));

    // Activation: y = relu(x), then y = 2 relu(x) + 0.5 y.
    cudnnActivationDescriptor_t act;
    must(cudnnCreateActivationDescriptor(&act) == CUDNN_STATUS_SUCCESS, "create activation");
    s = cudnnSetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0);
    check_dnn(s, "cudnnSetActivationDescriptor RELU");
    cudnnActivationMode_t mode;
    cudnnNanPropagation_t nan;
    double coef = -1;
    s = cudnnGetActivationDescriptor(act, &mode, &nan, &coef);
    check(s == CUDNN_STATUS_SUCCESS && mode == CUDNN_ACTIVATION_RELU &&
              nan == CUDNN_NOT_PROPAGATE_NAN && coef == 0.0,
          "cudnnGetActivationDescriptor", "%s", cudnnGetErrorString(s));
    for (int i = 0; i < total; i++)
        ref[i] = x[i] > 0 ? x[i] : 0;
    poison(y_d, total);
    s = cudnnActivationForward(h, act, &one, td, x_d, &zero, td, y_d);
    if (check_dnn(s, "cudnnActivationForward RELU"))
        matches("cudnnActivationForward RELU result", from_dev(y_d, total), ref, magnitudes(ref));
    for (int i = 0; i < total; i++)
        ref[i] = 2 * (x[i] > 0 ? x[i] : 0) + 0.5 * ref[i];
    s = cudnnActivationForward(h, act, &two, td, x_d, &half, td, y_d);
    if (check_dnn(s, "cudnnActivationForward RELU alpha 2 beta 0.5"))
        matches("cudnnActivationForward RELU alpha/beta result", from_dev(y_d, total), ref,
                magnitudes(ref));
    check_dnn(cudnnDestroyActivationDescriptor(act), "cudnnDestroyActivationDescriptor");

    // Softmax over the channels of each (n, h, w), and log-softmax over
    // each whole instance.
    for (int in = 0; in < n; in++)
        for (int p = 0; p < hh * ww; p++) {
            double mx = -1e30, sum = 0;
            for (int ic = 0; ic < c; ic++)
                mx = fmax(mx, x[(in * c + ic) * hh * ww + p]);
            for (int ic = 0; ic < c; ic++)
                sum += exp(x[(in * c + ic) * hh * ww + p] - mx);
            for (int ic = 0; ic < c; ic++)
                ref[(in * c + ic) * hh * ww + p] = exp(x[(in * c + ic) * hh * ww + p] - mx) / sum;
        }
    poison(y_d, total);
    s = cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, td, x_d,
                            &zero, td, y_d);
    if (check_dnn(s, "cudnnSoftmaxForward ACCURATE CHANNEL"))
        matches("cudnnSoftmaxForward CHANNEL result", from_dev(y_d, total), ref, magnitudes(ref));
    const int per = c * hh * ww;
    for (int in = 0; in < n; in++) {
        double mx = -1e30, sum = 0;
        for (int i = 0; i < per; i++)
            mx = fmax(mx, x[in * per + i]);
        for (int i = 0; i < per; i++)
            sum += exp(x[in * per + i] - mx);
        for (int i = 0; i < per; i++)
            ref[in * per + i] = x[in * per + i] - mx - log(sum);
    }
    poison(y_d, total);
    s = cudnnSoftmaxForward(h, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE, &one, td, x_d, &zero,
                            td, y_d);
    if (check_dnn(s, "cudnnSoftmaxForward LOG INSTANCE"))
        matches("cudnnSoftmaxForward LOG INSTANCE result", from_dev(y_d, total), ref,
                magnitudes(ref));

    check_dnn(cudnnDestroyTensorDescriptor(td), "destroy tensor descriptor");
    check_dnn(cudnnDestroyTensorDescriptor(bd), "destroy bias tensor descriptor");
    cudaFree(x_d);
    cudaFree(y_d);
    cudaFree(b_d);
}

// ---- Batch normalization -------------------------------------------------------------------------

static void test_batchnorm(cudnnHandle_t h)
{
    const int n = 4, c = 3, hh = 5, ww = 5, sp = hh * ww, total = n * c * sp, m = n * sp;
    const double eps = 1e-5, factor = 0.5;
    cudnnTensorDescriptor_t xd = tensor4d(n, c, hh, ww), pd;
    must(cudnnCreateTensorDescriptor(&pd) == CUDNN_STATUS_SUCCESS, "create bn descriptor");
    cudnnStatus_t s = cudnnDeriveBNTensorDescriptor(pd, xd, CUDNN_BATCHNORM_SPATIAL);
    cudnnDataType_t t;
    int dn, dc, dh, dw, ns, cs, hs, ws;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetTensor4dDescriptor(pd, &t, &dn, &dc, &dh, &dw, &ns, &cs, &hs, &ws);
    check(s == CUDNN_STATUS_SUCCESS && t == CUDNN_DATA_FLOAT && dn == 1 && dc == c && dh == 1 &&
              dw == 1,
          "cudnnDeriveBNTensorDescriptor SPATIAL is 1xCx1x1", "%s", cudnnGetErrorString(s));

    std::vector<float> x = data(total, 21), dy = data(total, 22), scale = data(c, 23),
                       bias = data(c, 24), rmean = data(c, 25), rvar(c);
    for (int i = 0; i < c; i++)
        rvar[i] = 0.5f + 0.25f * i;
    float *x_d = to_dev(x), *dy_d = to_dev(dy), *scale_d = to_dev(scale), *bias_d = to_dev(bias),
          *rmean_d = to_dev(rmean), *rvar_d = to_dev(rvar);
    float *y_d = NULL, *smean_d = NULL, *sinv_d = NULL, *dx_d = NULL, *dscale_d = NULL,
          *dbias_d = NULL;
    must(cudaMalloc((void **)&y_d, total * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&dx_d, total * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&smean_d, c * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&sinv_d, c * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&dscale_d, c * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&dbias_d, c * sizeof(float)) == cudaSuccess,
         "cudaMalloc bn");

    // Reference statistics per channel.
    std::vector<double> mean(c, 0), var(c, 0), istd(c);
    for (int i = 0; i < total; i++)
        mean[(i / sp) % c] += x[i];
    for (int ic = 0; ic < c; ic++)
        mean[ic] /= m;
    for (int i = 0; i < total; i++)
        var[(i / sp) % c] += (x[i] - mean[(i / sp) % c]) * (x[i] - mean[(i / sp) % c]);
    for (int ic = 0; ic < c; ic++) {
        var[ic] /= m;
        istd[ic] = 1 / sqrt(var[ic] + eps);
    }
    std::vector<double> ref(total), rm(c), rv(c), sm(c), si(c);
    for (int i = 0; i < total; i++) {
        int ic = (i / sp) % c;
        ref[i] = scale[ic] * (x[i] - mean[ic]) * istd[ic] + bias[ic];
    }
    for (int ic = 0; ic < c; ic++) {
        // The running variance takes the unbiased variance.
        rm[ic] = (1 - factor) * rmean[ic] + factor * mean[ic];
        rv[ic] = (1 - factor) * rvar[ic] + factor * var[ic] * m / (m - 1);
        sm[ic] = mean[ic];
        si[ic] = istd[ic];
    }
    float one = 1, zero = 0;
    poison(y_d, total);
    s = cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x_d, xd,
                                               y_d, pd, scale_d, bias_d, factor, rmean_d, rvar_d,
                                               eps, smean_d, sinv_d);
    if (check_dnn(s, "cudnnBatchNormalizationForwardTraining SPATIAL")) {
        matches("cudnnBatchNormalizationForwardTraining y", from_dev(y_d, total), ref,
                magnitudes(ref));
        matches("cudnnBatchNormalizationForwardTraining running mean", from_dev(rmean_d, c), rm,
                magnitudes(rm));
        matches("cudnnBatchNormalizationForwardTraining running variance", from_dev(rvar_d, c), rv,
                magnitudes(rv));
        matches("cudnnBatchNormalizationForwardTraining saved mean", from_dev(smean_d, c), sm,
                magnitudes(sm));
        matches("cudnnBatchNormalizationForwardTraining saved inverse variance",
                from_dev(sinv_d, c), si, magnitudes(si));
    }

    // Inference with the updated running statistics (as the GPU left them).
    std::vector<float> grm = from_dev(rmean_d, c), grv = from_dev(rvar_d, c);
    for (int i = 0; i < total; i++) {
        int ic = (i / sp) % c;
        ref[i] = scale[ic] * (x[i] - grm[ic]) / sqrt(grv[ic] + eps) + bias[ic];
    }
    poison(y_d, total);
    s = cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x_d,
                                                xd, y_d, pd, scale_d, bias_d, rmean_d, rvar_d, eps);
    if (check_dnn(s, "cudnnBatchNormalizationForwardInference SPATIAL"))
        matches("cudnnBatchNormalizationForwardInference y", from_dev(y_d, total), ref,
                magnitudes(ref));

    // Backward with the saved statistics.
    std::vector<double> dsum(c, 0), dxs(c, 0), dx(total), scale_r(c), dxm(total);
    for (int i = 0; i < total; i++) {
        int ic = (i / sp) % c;
        double xhat = (x[i] - mean[ic]) * istd[ic];
        dsum[ic] += dy[i];
        dxs[ic] += dy[i] * xhat;
    }
    for (int i = 0; i < total; i++) {
        int ic = (i / sp) % c;
        double xhat = (x[i] - mean[ic]) * istd[ic];
        dx[i] = scale[ic] * istd[ic] / m * (m * dy[i] - dsum[ic] - xhat * dxs[ic]);
        // The sums' magnitudes: dx cancels large terms.
        dxm[i] = fabs(scale[ic] * istd[ic]) * (fabs(dy[i]) + (fabs(dsum[ic]) + fabs(xhat * dxs[ic])) / m);
    }
    poison(dx_d, total);
    poison(dscale_d, c);
    poison(dbias_d, c);
    s = cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, xd,
                                        x_d, xd, dy_d, xd, dx_d, pd, scale_d, dscale_d, dbias_d, eps,
                                        smean_d, sinv_d);
    if (check_dnn(s, "cudnnBatchNormalizationBackward SPATIAL")) {
        matches("cudnnBatchNormalizationBackward dx", from_dev(dx_d, total), dx, dxm);
        matches("cudnnBatchNormalizationBackward dscale", from_dev(dscale_d, c), dxs,
                magnitudes(dxs));
        matches("cudnnBatchNormalizationBackward dbias", from_dev(dbias_d, c), dsum,
                magnitudes(dsum));
    }

    check_dnn(cudnnDestroyTensorDescriptor(xd), "destroy bn x descriptor");
    check_dnn(cudnnDestroyTensorDescriptor(pd), "destroy bn parameter descriptor");
    float *bufs[] = {x_d, dy_d, scale_d, bias_d, rmean_d, rvar_d, y_d, smean_d, sinv_d, dx_d,
                     dscale_d, dbias_d};
    for (float *b : bufs)
        cudaFree(b);
}

int main(void)
{
    cudnnHandle_t h;

    test_versions();
    must(cudaStreamCreate(&stream) == cudaSuccess, "cudaStreamCreate");
    must(check_dnn(cudnnCreate(&h), "cudnnCreate"), "cudnnCreate");
    cudaStream_t got = NULL;
    cudnnStatus_t s = cudnnSetStream(h, stream);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetStream(h, &got);
    check(s == CUDNN_STATUS_SUCCESS && got == stream, "cudnnSetStream/GetStream", "%s",
          cudnnGetErrorString(s));

    test_descriptors();
    test_conv(h);
    test_elementwise(h);
    test_batchnorm(h);

    check_dnn(cudnnDestroy(h), "cudnnDestroy");
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return check_exit_status();
}

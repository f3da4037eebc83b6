// cuDNN's backend (graph) API through rgpu: a convolution forward built as
// a graph -- tensors with unique ids, a convolution descriptor, the
// operation, the operation graph -- then engine heuristics (mode A: the
// count first, then that many engine configs), execution plans, the
// workspace size, a variant pack, execute, and the result checked against
// a CPU reference computed in double.  Attribute values travel as typed
// arrays: int64 dimensions, enums, floats, handles, descriptors, device
// pointers, and element counts read back the way cuDNN reports them.
//
// The heuristics' configs are tried in order until one finalizes into a
// plan; configs whose engine notes tensor cores or down-converted inputs
// (TF32) are passed over while another works.  Which engine runs, how many
// configs there are and the workspace size differ between GPUs and are
// never printed.  Tolerance, per element: |got - ref| <= 1e-4 *
// (sum |x w| + 1); the inputs are multiples of 1/8 in [-1, 1], so every
// product and sum is exact in fp32 (and in TF32) whatever order the GPU
// sums in.  Output must be identical natively and through rgpu.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <cudnn.h>
#include "check.h"

static cudaStream_t stream;

static bool check_dnn(cudnnStatus_t s, const char *name)
{
    return check(s == CUDNN_STATUS_SUCCESS, name, "%s", cudnnGetErrorString(s));
}

static void must(bool ok, const char *what)
{
    if (!ok) {
        check(false, what, "setup failed");
        exit(1);
    }
}

static std::vector<float> data(size_t n, unsigned seed)
{
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((int)((seed >> 16) % 17) - 8) / 8;
    }
    return v;
}

// x N x C x H x W, w K x C x R x S, padding 1, stride 2, dilation 1.
enum { N = 2, C = 3, H = 8, W = 8, K = 4, R = 3, S = 3, PAD = 1, STRIDE = 2 };
enum { P = 1 + (H + 2 * PAD - R) / STRIDE, Q = 1 + (W + 2 * PAD - S) / STRIDE };
enum { UID_X = 101, UID_W = 102, UID_Y = 103 };

static cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type, const char *what)
{
    cudnnBackendDescriptor_t d = NULL;
    must(cudnnBackendCreateDescriptor(type, &d) == CUDNN_STATUS_SUCCESS, what);
    return d;
}

// A packed NCHW float tensor.
static cudnnBackendDescriptor_t make_tensor(const int64_t dims[4], int64_t uid, const char *name)
{
    cudnnBackendDescriptor_t t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "create tensor");
    int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    int64_t align = 16;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    cudnnStatus_t s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE,
                                               1, &type);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
                                     &align);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(t);
    must(check_dnn(s, name), name);
    return t;
}

static void test_tensor_readback(cudnnBackendDescriptor_t x)
{
    int64_t count = -1;
    cudnnStatus_t s = cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 0,
                                               &count, NULL);
    check(s == CUDNN_STATUS_SUCCESS && count == 4, "tensor dimensions: count query gives 4",
          "%s %lld", cudnnGetErrorString(s), (long long)count);

    int64_t dims[8] = {0}, strides[8] = {0};
    // A NULL array makes it a count query whatever the requested count; an
    // array with none requested gets none, and the count says so.
    count = -1;
    s = cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 2, &count, NULL);
    check(s == CUDNN_STATUS_SUCCESS && count == 4, "tensor dimensions: 2 requested, NULL array gives 4",
          "%s %lld", cudnnGetErrorString(s), (long long)count);
    count = -1;
    s = cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 0, &count, dims);
    check(s == CUDNN_STATUS_SUCCESS && count == 0 && dims[0] == 0,
          "tensor dimensions: 0 requested into an array gives 0", "%s %lld",
          cudnnGetErrorString(s), (long long)count);
    count = -1;
    s = cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 8, &count, dims);
    check(s == CUDNN_STATUS_SUCCESS && count == 4 && dims[0] == N && dims[1] == C && dims[2] == H &&
              dims[3] == W,
          "tensor dimensions read back", "%s %lld", cudnnGetErrorString(s), (long long)count);

    // Fewer requested than there are: that many written and reported.
    count = -1;
    s = cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 2, &count, strides);
    check(s == CUDNN_STATUS_SUCCESS && count == 2 && strides[0] == C * H * W &&
              strides[1] == H * W && strides[2] == 0,
          "tensor strides: 2 of 4 read back", "%s %lld", cudnnGetErrorString(s), (long long)count);

    int64_t uid = 0;
    s = cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, NULL, &uid);
    check(s == CUDNN_STATUS_SUCCESS && uid == UID_X, "tensor unique id read back (no count)", "%s",
          cudnnGetErrorString(s));

    cudnnDataType_t type = CUDNN_DATA_DOUBLE;
    count = -1;
    s = cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &count,
                                 &type);
    check(s == CUDNN_STATUS_SUCCESS && count == 1 && type == CUDNN_DATA_FLOAT,
          "tensor data type read back", "%s", cudnnGetErrorString(s));

    bool is_virtual = true;
    s = cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &count,
                                 &is_virtual);
    check(s == CUDNN_STATUS_SUCCESS && count == 1 && !is_virtual, "tensor is not virtual", "%s",
          cudnnGetErrorString(s));

    // The wrong attribute type.
    int32_t dims32[8];
    s = cudnnBackendGetAttribute(x, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT32, 8, &count,
                                 dims32);
    check(s == CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
          "tensor dimensions as INT32 -> CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE", "%s",
          cudnnGetErrorString(s));

    // Reading before Finalize, writing after.
    cudnnBackendDescriptor_t fresh = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "create tensor");
    s = cudnnBackendGetAttribute(fresh, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 0, &count,
                                 NULL);
    check(s == CUDNN_STATUS_NOT_INITIALIZED,
          "GetAttribute before Finalize -> CUDNN_STATUS_NOT_INITIALIZED", "%s",
          cudnnGetErrorString(s));
    check_dnn(cudnnBackendDestroyDescriptor(fresh), "cudnnBackendDestroyDescriptor unfinalized");
    uid = 7;
    s = cudnnBackendSetAttribute(x, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    check(s == CUDNN_STATUS_BAD_PARAM, "SetAttribute after Finalize -> CUDNN_STATUS_BAD_PARAM",
          "%s", cudnnGetErrorString(s));
}

static cudnnBackendDescriptor_t make_conv(void)
{
    cudnnBackendDescriptor_t c = create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "create conv");
    int64_t nsp = 2, pad[2] = {PAD, PAD}, stride[2] = {STRIDE, STRIDE}, dil[2] = {1, 1};
    cudnnDataType_t ctype = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    cudnnStatus_t s = cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS,
                                               CUDNN_TYPE_INT64, 1, &nsp);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
                                     &ctype);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE,
                                     CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2,
                                     pad);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2,
                                     pad);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2,
                                     stride);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(c);
    must(check_dnn(s, "convolution descriptor finalized"), "convolution descriptor");

    int64_t count = -1, got[4] = {0};
    s = cudnnBackendGetAttribute(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 4,
                                 &count, got);
    check(s == CUDNN_STATUS_SUCCESS && count == 2 && got[0] == PAD && got[1] == PAD,
          "convolution pre-paddings read back", "%s %lld", cudnnGetErrorString(s),
          (long long)count);
    count = -1;
    s = cudnnBackendGetAttribute(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 0,
                                 &count, NULL);
    check(s == CUDNN_STATUS_SUCCESS && count == 1, "convolution spatial dims: count query gives 1",
          "%s %lld", cudnnGetErrorString(s), (long long)count);
    return c;
}

// Whether the engine of a config notes tensor cores or down-converted
// inputs (TF32 for float data).
static bool reduced_precision(cudnnBackendDescriptor_t cfg)
{
    cudnnBackendDescriptor_t engine = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "create engine");
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t count = 0;
    bool reduced = false;
    cudnnStatus_t s = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                     CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                     &count, notes);
    for (int64_t i = 0; s == CUDNN_STATUS_SUCCESS && i < count; i++)
        if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
            notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
            reduced = true;
    cudnnBackendDestroyDescriptor(engine);
    return s != CUDNN_STATUS_SUCCESS || reduced;
}

// A finalized plan for the config, or NULL.
static cudnnBackendDescriptor_t make_plan(cudnnHandle_t h, cudnnBackendDescriptor_t cfg)
{
    cudnnBackendDescriptor_t plan = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "create plan");
    cudnnStatus_t s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                               CUDNN_TYPE_HANDLE, 1, &h);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(plan);
    if (s != CUDNN_STATUS_SUCCESS) {
        cudnnBackendDestroyDescriptor(plan);
        return NULL;
    }
    return plan;
}

int main(void)
{
    cudnnHandle_t h;
    must(cudaStreamCreate(&stream) == cudaSuccess, "cudaStreamCreate");
    must(check_dnn(cudnnCreate(&h), "cudnnCreate"), "cudnnCreate");
    check_dnn(cudnnSetStream(h, stream), "cudnnSetStream");

    // ---- The graph ----------------------------------------------------------------------
    const int64_t xdims[4] = {N, C, H, W}, wdims[4] = {K, C, R, S}, ydims[4] = {N, K, P, Q};
    cudnnBackendDescriptor_t x = make_tensor(xdims, UID_X, "tensor x finalized");
    cudnnBackendDescriptor_t w = make_tensor(wdims, UID_W, "tensor w finalized");
    cudnnBackendDescriptor_t y = make_tensor(ydims, UID_Y, "tensor y finalized");
    test_tensor_readback(x);
    cudnnBackendDescriptor_t conv = make_conv();

    cudnnBackendDescriptor_t op =
        create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, "create operation");
    float alpha = 1.0f, beta = 0.0f;
    cudnnStatus_t s = cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                                     CUDNN_TYPE_FLOAT, 1, &alpha);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
                                     CUDNN_TYPE_FLOAT, 1, &beta);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(op);
    must(check_dnn(s, "convolution forward operation finalized"), "operation");
    // Reading alpha back is left out: cuDNN 9.19 on an H200 answers
    // CUDNN_STATUS_BAD_PARAM for it as a double, while the same library
    // without a GPU accepted it; the check would test cuDNN, not rgpu.

    cudnnBackendDescriptor_t graph = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "create graph");
    s = cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(graph);
    must(check_dnn(s, "operation graph finalized"), "graph");

    // ---- Heuristics: the count, then the configs -----------------------------------------
    cudnnBackendDescriptor_t heur = create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "create heuristics");
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    s = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                     &mode);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(heur);
    must(check_dnn(s, "engine heuristics (mode A) finalized"), "heuristics");
    int64_t nconfigs = 0;
    s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 0, &nconfigs, NULL);
    must(check(s == CUDNN_STATUS_SUCCESS && nconfigs >= 1,
               "heuristics: count query gives at least one config", "%s %lld",
               cudnnGetErrorString(s), (long long)nconfigs),
         "heuristics count");
    std::vector<cudnnBackendDescriptor_t> configs(nconfigs);
    for (auto &c : configs)
        c = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "create engine config");
    int64_t returned = -1;
    s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                 nconfigs, &returned, configs.data());
    must(check(s == CUDNN_STATUS_SUCCESS && returned >= 1 && returned <= nconfigs,
               "heuristics: engine configs read into created descriptors", "%s %lld of %lld",
               cudnnGetErrorString(s), (long long)returned, (long long)nconfigs),
         "heuristics results");

    // ---- A plan: full precision first --------------------------------------------------
    cudnnBackendDescriptor_t plan = NULL;
    for (int pass = 0; pass < 2 && !plan; pass++)
        for (int64_t i = 0; i < returned && !plan; i++)
            if (pass == 1 || !reduced_precision(configs[i]))
                plan = make_plan(h, configs[i]);
    must(check(plan != NULL, "an engine config finalizes into an execution plan", " "), "plan");
    int64_t ws_size = -1;
    int64_t count = -1;
    s = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                 &count, &ws_size);
    check(s == CUDNN_STATUS_SUCCESS && count == 1 && ws_size >= 0,
          "execution plan workspace size read back", "%s", cudnnGetErrorString(s));

    // ---- Data, variant pack, execute ----------------------------------------------------
    std::vector<float> xh = data((size_t)N * C * H * W, 31), wh = data((size_t)K * C * R * S, 32);
    size_t ny = (size_t)N * K * P * Q;
    float *x_d = NULL, *w_d = NULL, *y_d = NULL;
    void *ws = NULL;
    must(cudaMalloc((void **)&x_d, xh.size() * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&w_d, wh.size() * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&y_d, ny * sizeof(float)) == cudaSuccess &&
             (ws_size <= 0 || cudaMalloc(&ws, (size_t)ws_size) == cudaSuccess),
         "cudaMalloc");
    must(cudaMemcpy(x_d, xh.data(), xh.size() * sizeof(float), cudaMemcpyHostToDevice) ==
                 cudaSuccess &&
             cudaMemcpy(w_d, wh.data(), wh.size() * sizeof(float), cudaMemcpyHostToDevice) ==
                 cudaSuccess &&
             cudaMemset(y_d, 0xff, ny * sizeof(float)) == cudaSuccess,    // NaNs: beta is 0
         "copy inputs");

    cudnnBackendDescriptor_t pack = create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "create variant pack");
    void *ptrs[3] = {x_d, w_d, y_d};
    int64_t uids[3] = {UID_X, UID_W, UID_Y};
    s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3,
                                 ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3,
                                     uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                     &ws);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(pack);
    must(check_dnn(s, "variant pack finalized"), "variant pack");

    s = cudnnBackendExecute(h, plan, pack);
    if (check_dnn(s, "cudnnBackendExecute")) {
        std::vector<float> got(ny);
        must(cudaStreamSynchronize(stream) == cudaSuccess &&
                 cudaMemcpy(got.data(), y_d, ny * sizeof(float), cudaMemcpyDeviceToHost) ==
                     cudaSuccess,
             "copy result");
        size_t bad = ny;
        for (int n = 0; n < N && bad == ny; n++)
            for (int k = 0; k < K; k++)
                for (int p = 0; p < P; p++)
                    for (int q = 0; q < Q; q++) {
                        double acc = 0, mag = 0;
                        for (int c = 0; c < C; c++)
                            for (int r = 0; r < R; r++)
                                for (int t = 0; t < S; t++) {
                                    int ih = p * STRIDE - PAD + r, iw = q * STRIDE - PAD + t;
                                    if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                        continue;
                                    double v = (double)xh[((n * C + c) * H + ih) * W + iw] *
                                               wh[((k * C + c) * R + r) * S + t];
                                    acc += v;
                                    mag += fabs(v);
                                }
                        size_t i = ((size_t)(n * K + k) * P + p) * Q + q;
                        if (!(fabs(got[i] - acc) <= 1e-4 * (mag + 1)) && bad == ny)
                            bad = i;
                    }
        check(bad == ny, "convolution graph result", "element %zu outside the tolerance", bad);
    }

    // ---- Teardown ---------------------------------------------------------------------------
    cudnnBackendDescriptor_t all[] = {pack, plan, heur, graph, op, conv, x, w, y};
    s = CUDNN_STATUS_SUCCESS;
    for (cudnnBackendDescriptor_t d : all)
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendDestroyDescriptor(d);
    for (auto &c : configs)
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendDestroyDescriptor(c);
    check_dnn(s, "cudnnBackendDestroyDescriptor all");
    cudaFree(x_d);
    cudaFree(w_d);
    cudaFree(y_d);
    cudaFree(ws);
    check_dnn(cudnnDestroy(h), "cudnnDestroy");
    check_cuda(cudaStreamDestroy(stream), "cudaStreamDestroy");
    return check_exit_status();
}

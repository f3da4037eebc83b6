// A tensor passed by value through cuDNN's backend API: y = x * s, one
// pointwise multiplication whose scalar s is a by-value tensor
// (CUDNN_ATTR_TENSOR_IS_BY_VALUE), as cudnn-frontend passes attention's
// scale.  Its variant pack pointer is a host address, which cuDNN reads
// when the plan executes; the plan runs twice, with two different host
// values, and each result must be x times the value of that run.
//
// A GPU's cuDNN may have no engine for such a graph: then the program
// says so and stops (the same natively and through rgpu), unless it is
// given "require-engine" (the fake GPU backend has one: tests/progs).
// Inputs are multiples of 1/8 and the scales powers of two times small
// integers, so every product is exact in fp32.
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <vector>
#include <cudnn.h>
#include "check.h"

enum { N = 1, C = 2, H = 4, W = 8 };
enum { UID_X = 11, UID_S = 12, UID_Y = 13 };

static bool dnn_ok(cudnnStatus_t s, const char *name)
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

static cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type)
{
    cudnnBackendDescriptor_t d = NULL;
    must(cudnnBackendCreateDescriptor(type, &d) == CUDNN_STATUS_SUCCESS,
         "cudnnBackendCreateDescriptor");
    return d;
}

static cudnnStatus_t set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a,
                         cudnnBackendAttributeType_t t, int64_t n, const void *v)
{
    return cudnnBackendSetAttribute(d, a, t, n, v);
}

// A packed float tensor of dims; by_value makes it a scalar passed by value.
static cudnnBackendDescriptor_t tensor(const int64_t dims[4], int64_t uid, bool by_value)
{
    cudnnBackendDescriptor_t t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    int64_t align = 16;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    bool yes = true;
    cudnnStatus_t s = set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    if (s == CUDNN_STATUS_SUCCESS && by_value)
        s = set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(t);
    must(dnn_ok(s, by_value ? "by-value scalar tensor finalized" : "tensor finalized"), "tensor");
    return t;
}

// The operation graph of y = x * s.
static cudnnBackendDescriptor_t graph_of(cudnnHandle_t h, cudnnBackendDescriptor_t x,
                                         cudnnBackendDescriptor_t scale, cudnnBackendDescriptor_t y,
                                         cudnnBackendDescriptor_t *parts)
{
    cudnnBackendDescriptor_t pw = create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    cudnnPointwiseMode_t mode = CUDNN_POINTWISE_MUL;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    cudnnStatus_t s = set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(pw);
    must(dnn_ok(s, "pointwise multiplication finalized"), "pointwise");

    cudnnBackendDescriptor_t op = create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    s = set(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &scale);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(op);
    must(dnn_ok(s, "pointwise operation finalized"), "operation");

    cudnnBackendDescriptor_t graph = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    s = set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(graph);
    must(dnn_ok(s, "operation graph finalized"), "graph");
    parts[0] = pw;
    parts[1] = op;
    return graph;
}

// The first engine config of the heuristics that finalizes into a plan, or
// NULL; configs and heuristics are destroyed.
static cudnnBackendDescriptor_t plan_of(cudnnHandle_t h, cudnnBackendDescriptor_t graph)
{
    cudnnBackendDescriptor_t heur = create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    int64_t n = 0;
    cudnnStatus_t s = set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(heur);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL);
    std::vector<cudnnBackendDescriptor_t> cfgs(s == CUDNN_STATUS_SUCCESS && n > 0 ? n : 0);
    for (auto &c : cfgs)
        c = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    if (!cfgs.empty())
        s = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &n, cfgs.data());
    cudnnBackendDescriptor_t plan = NULL;
    for (int64_t i = 0; s == CUDNN_STATUS_SUCCESS && i < n && i < (int64_t)cfgs.size() && !plan;
         i++) {
        cudnnBackendDescriptor_t p = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
        cudnnStatus_t ps = set(p, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
        if (ps == CUDNN_STATUS_SUCCESS)
            ps = set(p, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                     &cfgs[i]);
        if (ps == CUDNN_STATUS_SUCCESS)
            ps = cudnnBackendFinalize(p);
        if (ps == CUDNN_STATUS_SUCCESS)
            plan = p;
        else
            cudnnBackendDestroyDescriptor(p);
    }
    for (auto &c : cfgs)
        cudnnBackendDestroyDescriptor(c);
    cudnnBackendDestroyDescriptor(heur);
    return plan;
}

// y = x * scale through plan, with a variant pack naming scale by its host
// address.
static bool run(cudnnHandle_t h, cudnnBackendDescriptor_t plan, const float *x_d, float *y_d,
                void *ws, float scale, const char *name)
{
    cudnnBackendDescriptor_t pack = create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    void *ptrs[3] = {(void *)x_d, &scale, y_d};
    int64_t uids[3] = {UID_X, UID_S, UID_Y};
    cudnnStatus_t s = set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(pack);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendExecute(h, plan, pack);
    cudnnBackendDestroyDescriptor(pack);
    return dnn_ok(s, name);
}

int main(int argc, char **argv)
{
    bool require_engine = argc > 1 && strcmp(argv[1], "require-engine") == 0;
    cudnnHandle_t h;
    must(dnn_ok(cudnnCreate(&h), "cudnnCreate"), "cudnnCreate");

    const int64_t xdims[4] = {N, C, H, W}, sdims[4] = {1, 1, 1, 1};
    cudnnBackendDescriptor_t x = tensor(xdims, UID_X, false);
    cudnnBackendDescriptor_t scale = tensor(sdims, UID_S, true);
    cudnnBackendDescriptor_t y = tensor(xdims, UID_Y, false);
    cudnnBackendDescriptor_t parts[2];
    cudnnBackendDescriptor_t graph = graph_of(h, x, scale, y, parts);
    cudnnBackendDescriptor_t plan = plan_of(h, graph);
    if (!plan && !require_engine) {
        printf("skip: no engine config of this cuDNN finalizes a by-value pointwise graph\n");
        return check_exit_status();
    }
    must(check(plan != NULL, "an engine config finalizes into a plan", "none did"), "plan");
    int64_t ws_size = 0;
    check(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, NULL, &ws_size) == CUDNN_STATUS_SUCCESS &&
              ws_size >= 0,
          "workspace size read back", " ");

    size_t n = (size_t)N * C * H * W;
    std::vector<float> xh(n);
    for (size_t i = 0; i < n; i++)
        xh[i] = (float)((int)(i * 7 % 17) - 8) / 8;
    float *x_d = NULL, *y_d = NULL;
    void *ws = NULL;
    must(cudaMalloc((void **)&x_d, n * sizeof(float)) == cudaSuccess &&
             cudaMalloc((void **)&y_d, n * sizeof(float)) == cudaSuccess &&
             (ws_size <= 0 || cudaMalloc(&ws, (size_t)ws_size) == cudaSuccess) &&
             cudaMemcpy(x_d, xh.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess,
         "inputs");

    static const float scales[] = {2.5f, -0.75f};
    for (float sc : scales) {
        char name[96];
        snprintf(name, sizeof name, "y = x * %g with the scale passed by value", sc);
        if (!run(h, plan, x_d, y_d, ws, sc, name))
            continue;
        std::vector<float> got(n);
        must(cudaMemcpy(got.data(), y_d, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess,
             "copy result");
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (got[i] != xh[i] * sc)
                bad = i;
        snprintf(name, sizeof name, "result of x * %g", sc);
        check(bad == n, name, "element %zu: %g, wanted %g", bad, bad < n ? got[bad] : 0.0,
              bad < n ? xh[bad] * sc : 0.0);
    }

    cudnnBackendDescriptor_t all[] = {plan, graph, parts[1], parts[0], x, scale, y};
    cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
    for (cudnnBackendDescriptor_t d : all)
        if (s == CUDNN_STATUS_SUCCESS)
            s = cudnnBackendDestroyDescriptor(d);
    dnn_ok(s, "descriptors destroyed");
    cudaFree(x_d);
    cudaFree(y_d);
    cudaFree(ws);
    dnn_ok(cudnnDestroy(h), "cudnnDestroy");
    return check_exit_status();
}

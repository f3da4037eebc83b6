// cuDNN's backend API driven the way cudnn-frontend drives it for
// PyTorch's convolutions (its v8 builders, as ATen's Conv_v8.cpp uses
// them), one graph per new convolution shape:
//
//   tensors x, w, y and a convolution descriptor, the operation, the
//   operation graph; heuristics (instant mode): the count of engine
//   configs, then that many configs read into created descriptors; a
//   filter that reads, for every config, the numerical notes of its engine
//   (an engine descriptor made, filled from the config, read, destroyed)
//   and passes over tensor-core and down-converting engines for fp32; then
//   a plan for the first config that finalizes, and what the frontend
//   reads of it to tag it: the config's engine, its notes, its global
//   index, the config's knob choices (44 knob-choice descriptors made,
//   filled, each read twice, destroyed) and the workspace size; a variant
//   pack and the execution, checked against a CPU reference; the graph's
//   descriptors destroyed, the plan kept (PyTorch caches it) until the end.
//
//   cudnn_frontend [graphs N]   N graphs of different shapes (default 3)
//   cudnn_frontend deferred-errors   (rgpu; tests/cudnn-roundtrips.sh)
//       a set that cuDNN refuses, on a descriptor not finalized yet, is
//       reported by the descriptor's next call that waits: its finalize,
//       or a get; the call after that runs.  A plan set to an engine
//       config cuDNN refuses fails to finalize, and the next config makes
//       a plan, as cudnn-frontend goes on.  With "blocking"
//       (RGPU_SYNC=blocking), by the set itself.
//   cudnn_frontend bad-handles   (rgpu: undefined natively)
//       descriptors never made or destroyed get CUDNN_STATUS_BAD_PARAM at
//       once, from destroy, set, get and finalize alike, and so do
//       descriptors and cuDNN handles never made inside an attribute.
//
// tests/cudnn-roundtrips.sh counts the calls that wait for rgpud per graph.
// Inputs are multiples of 1/8 in [-1, 1]; tolerance per element
// |got - ref| <= 1e-4 * (sum |x w| + 1), for engines (Winograd, FFT) that
// do not sum exactly.  Which engine runs differs between GPUs and is never
// printed.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include <cudnn.h>
#include "check.h"

enum { UID_X = 'x', UID_Y = 'y', UID_W = 'w' };

static cudnnHandle_t handle;
static cudaStream_t stream;

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

static cudnnStatus_t get(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a,
                         cudnnBackendAttributeType_t t, int64_t n, int64_t *count, void *v)
{
    return cudnnBackendGetAttribute(d, a, t, n, count, v);
}

// ---- building a graph ---------------------------------------------------------------

static cudnnBackendDescriptor_t tensor(const int64_t dims[4], int64_t uid)
{
    cudnnBackendDescriptor_t t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    int64_t align = 16;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    cudnnStatus_t s = set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(t);
    must(s == CUDNN_STATUS_SUCCESS, "tensor");
    return t;
}

static cudnnBackendDescriptor_t convolution(int64_t pad)
{
    cudnnBackendDescriptor_t c = create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    int64_t nsp = 2, pads[2] = {pad, pad}, one[2] = {1, 1};
    cudnnDataType_t ctype = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    cudnnStatus_t s = set(c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ctype);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, one);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, one);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(c);
    must(s == CUDNN_STATUS_SUCCESS, "convolution descriptor");
    return c;
}

struct graph {
    cudnnBackendDescriptor_t x, w, y, conv, op, graph;
};

static struct graph build_graph(const int64_t xd[4], const int64_t wd[4], const int64_t yd[4],
                                int64_t pad)
{
    struct graph g;
    g.x = tensor(xd, UID_X);
    g.y = tensor(yd, UID_Y);
    g.w = tensor(wd, UID_W);
    g.conv = convolution(pad);
    g.op = create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    float alpha = 1, beta = 0;
    cudnnStatus_t s = set(g.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g.x);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(g.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                1, &g.y);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(g.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                1, &g.w);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(g.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g.conv);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(g.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(g.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(g.op);
    must(s == CUDNN_STATUS_SUCCESS, "operation");
    g.graph = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    s = set(g.graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(g.graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g.op);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(g.graph);
    must(s == CUDNN_STATUS_SUCCESS, "operation graph");
    return g;
}

static void destroy_graph(struct graph *g)
{
    cudnnBackendDescriptor_t all[] = {g->graph, g->op, g->conv, g->w, g->y, g->x};
    for (cudnnBackendDescriptor_t d : all)
        must(cudnnBackendDestroyDescriptor(d) == CUDNN_STATUS_SUCCESS, "destroy");
}

// ---- heuristics, the filter, plans ---------------------------------------------------------

// The heuristics' engine configs: the count, then the configs.
static std::vector<cudnnBackendDescriptor_t> engine_configs(cudnnBackendDescriptor_t graph,
                                                            cudnnBackendDescriptor_t *heur)
{
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_INSTANT;
    int64_t n = -1, got = -1;
    *heur = create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    cudnnStatus_t s = set(*heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(*heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(*heur);
    if (s == CUDNN_STATUS_SUCCESS)
        s = get(*heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, NULL);
    must(s == CUDNN_STATUS_SUCCESS && n >= 1, "heuristics");
    std::vector<cudnnBackendDescriptor_t> cfgs(n);
    for (auto &c : cfgs)
        c = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    s = get(*heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &got,
            cfgs.data());
    must(s == CUDNN_STATUS_SUCCESS && got >= 1 && got <= n, "heuristics results");
    for (int64_t i = got; i < n; i++)
        cudnnBackendDestroyDescriptor(cfgs[i]);
    cfgs.resize(got);
    return cfgs;
}

// cudnn-frontend's hasNumericalNote: the config's engine, made for the
// question and destroyed after it.
static bool has_note(cudnnBackendDescriptor_t cfg, cudnnBackendNumericalNote_t note)
{
    cudnnBackendDescriptor_t engine = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t count = -1;
    bool has = false;
    if (get(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
            &engine) == CUDNN_STATUS_SUCCESS) {
        count = 0;
        get(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
            CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes);
        for (int64_t i = 0; i < count; i++)
            has |= notes[i] == note;
    }
    cudnnBackendDestroyDescriptor(engine);
    return has;
}

// PyTorch's filter for fp32 data without TF32.
static bool reduced_precision(cudnnBackendDescriptor_t cfg)
{
    return has_note(cfg, CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) ||
           has_note(cfg, CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
}

// What ExecutionPlanBuilder::build reads after the plan finalized: the
// config's engine, the engine's notes (each a count, then the values) and
// global index, the config's knob choices, the workspace size.
static bool tag_plan(cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t cfg,
                     int64_t *workspace)
{
    cudnnBackendDescriptor_t engine = create(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    int64_t count = 0, index = -1, nknobs = 0;
    cudnnStatus_t s = get(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                          &count, &engine);
    cudnnBackendDescriptor_t knobs[CUDNN_KNOB_TYPE_COUNTS];
    for (auto &k : knobs)
        k = create(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR);
    if (s == CUDNN_STATUS_SUCCESS)
        s = get(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index);
    if (s == CUDNN_STATUS_SUCCESS)
        s = get(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                CUDNN_KNOB_TYPE_COUNTS, &nknobs, knobs);
    for (int64_t i = 0; s == CUDNN_STATUS_SUCCESS && i < nknobs && i < CUDNN_KNOB_TYPE_COUNTS;
         i++) {
        cudnnBackendKnobType_t type = CUDNN_KNOB_TYPE_COUNTS;
        int64_t choice = -2;
        s = get(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, NULL, &type);
        if (s == CUDNN_STATUS_SUCCESS)
            s = get(knobs[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, NULL,
                    &choice);
        if (s == CUDNN_STATUS_SUCCESS && (type >= CUDNN_KNOB_TYPE_COUNTS || choice == -2))
            s = CUDNN_STATUS_BAD_PARAM;
    }
    for (auto &k : knobs)
        cudnnBackendDestroyDescriptor(k);
    cudnnBackendNumericalNote_t nnotes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    cudnnBackendBehaviorNote_t bnotes[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    if (s == CUDNN_STATUS_SUCCESS)
        s = get(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, NULL);
    if (s == CUDNN_STATUS_SUCCESS)
        s = get(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, nnotes);
    if (s == CUDNN_STATUS_SUCCESS)
        s = get(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &count, NULL);
    if (s == CUDNN_STATUS_SUCCESS)
        s = get(engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &count, bnotes);
    if (s == CUDNN_STATUS_SUCCESS)
        s = get(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, NULL,
                workspace);
    cudnnBackendDestroyDescriptor(engine);
    return s == CUDNN_STATUS_SUCCESS && index >= 0 && *workspace >= 0;
}

// A plan for the config (ExecutionPlanBuilder::build), or NULL when it does
// not finalize.
static cudnnBackendDescriptor_t build_plan(cudnnBackendDescriptor_t cfg, int64_t *workspace)
{
    cudnnBackendDescriptor_t plan = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnStatus_t s = set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                &cfg);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(plan);
    if (s == CUDNN_STATUS_SUCCESS && tag_plan(plan, cfg, workspace))
        return plan;
    cudnnBackendDestroyDescriptor(plan);
    return NULL;
}

// ---- running and checking ----------------------------------------------------------------

static std::vector<float> data(size_t n, unsigned seed)
{
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (float)((int)((seed >> 16) % 17) - 8) / 8;
    }
    return v;
}

// y = conv(x, w) through the plan, checked against the CPU.
static bool run_conv(cudnnBackendDescriptor_t plan, int64_t ws_size, const int64_t xd[4],
                     const int64_t wd[4], const int64_t yd[4], int64_t pad, unsigned seed)
{
    size_t nx = xd[0] * xd[1] * xd[2] * xd[3], nw = wd[0] * wd[1] * wd[2] * wd[3],
           ny = yd[0] * yd[1] * yd[2] * yd[3];
    std::vector<float> xh = data(nx, seed), wh = data(nw, seed + 1), got(ny);
    float *x = NULL, *w = NULL, *y = NULL;
    void *ws = NULL;
    must(cudaMalloc((void **)&x, nx * 4) == cudaSuccess &&
             cudaMalloc((void **)&w, nw * 4) == cudaSuccess &&
             cudaMalloc((void **)&y, ny * 4) == cudaSuccess &&
             (ws_size <= 0 || cudaMalloc(&ws, (size_t)ws_size) == cudaSuccess) &&
             cudaMemcpy(x, xh.data(), nx * 4, cudaMemcpyHostToDevice) == cudaSuccess &&
             cudaMemcpy(w, wh.data(), nw * 4, cudaMemcpyHostToDevice) == cudaSuccess,
         "inputs");
    cudnnBackendDescriptor_t pack = create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    void *ptrs[3] = {x, y, w};
    int64_t uids[3] = {UID_X, UID_Y, UID_W};
    cudnnStatus_t s = set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendFinalize(pack);
    // As PyTorch does before each cuDNN call: give the handle its stream,
    // and ask it back.
    cudaStream_t got_stream = NULL;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetStream(handle, stream);
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnGetStream(handle, &got_stream);
    if (s == CUDNN_STATUS_SUCCESS && got_stream != stream)
        s = CUDNN_STATUS_INTERNAL_ERROR;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendExecute(handle, plan, pack);
    cudnnBackendDestroyDescriptor(pack);
    bool ok = s == CUDNN_STATUS_SUCCESS &&
              cudaMemcpy(got.data(), y, ny * 4, cudaMemcpyDeviceToHost) == cudaSuccess;
    for (int64_t k = 0; ok && k < yd[1]; k++)
        for (int64_t p = 0; ok && p < yd[2]; p++)
            for (int64_t q = 0; ok && q < yd[3]; q++) {
                double acc = 0, mag = 0;
                for (int64_t c = 0; c < xd[1]; c++)
                    for (int64_t r = 0; r < wd[2]; r++)
                        for (int64_t t = 0; t < wd[3]; t++) {
                            int64_t ih = p - pad + r, iw = q - pad + t;
                            if (ih < 0 || ih >= xd[2] || iw < 0 || iw >= xd[3])
                                continue;
                            double v = (double)xh[(c * xd[2] + ih) * xd[3] + iw] *
                                       wh[((k * wd[1] + c) * wd[2] + r) * wd[3] + t];
                            acc += v;
                            mag += fabs(v);
                        }
                ok = fabs(got[(k * yd[2] + p) * yd[3] + q] - acc) <= 1e-4 * (mag + 1);
            }
    cudaFree(x);
    cudaFree(w);
    cudaFree(y);
    cudaFree(ws);
    return ok;
}

// One convolution shape, as PyTorch meets a new one; the plan it kept.
static cudnnBackendDescriptor_t one_graph(int g, cudnnBackendDescriptor_t *plan_cfg)
{
    int64_t c = 2 + g % 3, hw = 5 + g, k = 3, pad = 1;
    const int64_t xd[4] = {1, c, hw, hw}, wd[4] = {k, c, 3, 3}, yd[4] = {1, k, hw, hw};
    struct graph gr = build_graph(xd, wd, yd, pad);
    cudnnBackendDescriptor_t heur;
    std::vector<cudnnBackendDescriptor_t> cfgs = engine_configs(gr.graph, &heur);
    std::vector<bool> kept(cfgs.size());
    for (size_t i = 0; i < cfgs.size(); i++)
        kept[i] = !reduced_precision(cfgs[i]);
    cudnnBackendDescriptor_t plan = NULL;
    int64_t ws = 0;
    size_t chosen = cfgs.size();
    for (int pass = 0; pass < 2 && !plan; pass++)
        for (size_t i = 0; i < cfgs.size() && !plan; i++)
            if ((pass == 0) == kept[i] && (plan = build_plan(cfgs[i], &ws)))
                chosen = i;
    char name[64];
    snprintf(name, sizeof name, "graph %d: a plan", g);
    must(check(plan != NULL, name, "no config finalized"), "plan");
    snprintf(name, sizeof name, "graph %d: convolution result", g);
    check(run_conv(plan, ws, xd, wd, yd, pad, 40 + g), name, "differs from the CPU's");
    for (size_t i = 0; i < cfgs.size(); i++)
        if (i != chosen)
            cudnnBackendDestroyDescriptor(cfgs[i]);
    *plan_cfg = cfgs[chosen];
    cudnnBackendDestroyDescriptor(heur);
    destroy_graph(&gr);
    return plan;
}

// ---- deferred errors and bad handles -----------------------------------------------------

// A set cuDNN refuses (dimensions as INT32) on a tensor not finalized:
// reported by the set itself when it waited, or else by the tensor's
// finalize, which does not run then; a second finalize does.  The same
// through a get on another tensor (a second unique id), which reports the
// set's failure instead of NOT_INITIALIZED.
static void deferred_errors(bool blocking)
{
    const int64_t dims[4] = {1, 2, 3, 4}, strides[4] = {24, 12, 4, 1}, ids[2] = {5, 6};
    const int32_t dims32[4] = {1, 2, 3, 4};
    int64_t align = 16, uid = 7, count = 0;
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    cudnnStatus_t bad = set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT32, 4, dims32);
    cudnnStatus_t s = set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    if (s == CUDNN_STATUS_SUCCESS)
        s = set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    cudnnStatus_t fin = cudnnBackendFinalize(t);
    if (blocking) {
        check(bad != CUDNN_STATUS_SUCCESS && s == CUDNN_STATUS_SUCCESS &&
                  fin == CUDNN_STATUS_SUCCESS,
              "blocking: a refused set reports its failure itself", "set %s, finalize %s",
              cudnnGetErrorString(bad), cudnnGetErrorString(fin));
    } else {
        check(bad == CUDNN_STATUS_SUCCESS && s == CUDNN_STATUS_SUCCESS &&
                  fin == CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE,
              "a refused set is reported by the descriptor's finalize", "set %s, finalize %s",
              cudnnGetErrorString(bad), cudnnGetErrorString(fin));
        s = cudnnBackendFinalize(t);
        check(s == CUDNN_STATUS_SUCCESS, "the finalize after the report runs", "%s",
              cudnnGetErrorString(s));
    }
    cudnnBackendDestroyDescriptor(t);

    cudnnBackendDescriptor_t u = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    bad = set(u, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 2, ids);
    s = get(u, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 0, &count, NULL);
    if (blocking)
        check(bad == CUDNN_STATUS_BAD_PARAM && s == CUDNN_STATUS_NOT_INITIALIZED,
              "blocking: a get after a refused set reports NOT_INITIALIZED", "set %s, get %s",
              cudnnGetErrorString(bad), cudnnGetErrorString(s));
    else
        check(bad == CUDNN_STATUS_SUCCESS && s == CUDNN_STATUS_BAD_PARAM,
              "a refused set is reported by the descriptor's next get", "set %s, get %s",
              cudnnGetErrorString(bad), cudnnGetErrorString(s));
    s = get(u, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 0, &count, NULL);
    check(s == CUDNN_STATUS_NOT_INITIALIZED, "the get after the report runs", "%s",
          cudnnGetErrorString(s));
    cudnnBackendDestroyDescriptor(u);

    // cudnn-frontend's way on: a plan whose engine config cuDNN refuses
    // (one never finalized) fails to finalize, and the next config is
    // tried.
    const int64_t xd[4] = {1, 2, 5, 5}, wd[4] = {3, 2, 3, 3}, yd[4] = {1, 3, 5, 5};
    struct graph g = build_graph(xd, wd, yd, 1);
    cudnnBackendDescriptor_t heur, fresh = create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    std::vector<cudnnBackendDescriptor_t> cfgs = engine_configs(g.graph, &heur);
    cudnnBackendDescriptor_t plan = create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    s = set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    bad = set(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
              &fresh);
    fin = cudnnBackendFinalize(plan);
    check(s == CUDNN_STATUS_SUCCESS && (blocking ? bad : fin) != CUDNN_STATUS_SUCCESS &&
              (blocking || bad == CUDNN_STATUS_SUCCESS),
          blocking ? "blocking: an unfinalized engine config is refused by the plan's set"
                   : "an unfinalized engine config fails the plan's finalize",
          "handle %s, config %s, finalize %s", cudnnGetErrorString(s), cudnnGetErrorString(bad),
          cudnnGetErrorString(fin));
    cudnnBackendDestroyDescriptor(plan);
    int64_t ws = 0;
    cudnnBackendDescriptor_t next = NULL;
    for (size_t i = 0; i < cfgs.size() && !next; i++)
        next = build_plan(cfgs[i], &ws);
    check(next != NULL, "the next engine config makes a plan", "none did");
    if (next)
        cudnnBackendDestroyDescriptor(next);
    for (auto &c : cfgs)
        cudnnBackendDestroyDescriptor(c);
    cudnnBackendDestroyDescriptor(fresh);
    cudnnBackendDestroyDescriptor(heur);
    destroy_graph(&g);
}

static void expect(cudnnStatus_t got, cudnnStatus_t want, const char *name)
{
    check(got == want, name, "%s, wanted %s", cudnnGetErrorString(got),
          cudnnGetErrorString(want));
}

static void bad_handles(void)
{
    int64_t uid = 1, count = 0;
    static char never[64];
    cudnnBackendDescriptor_t forged = (cudnnBackendDescriptor_t)never;
    cudnnBackendDescriptor_t t = create(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    cudnnBackendDescriptor_t op = create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    cudnnBackendDescriptor_t graph = create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    cudnnHandle_t forged_handle = (cudnnHandle_t)(never + 8);
    expect(cudnnBackendDestroyDescriptor(forged), CUDNN_STATUS_BAD_PARAM,
           "destroy of a descriptor never made");
    expect(set(forged, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid),
           CUDNN_STATUS_BAD_PARAM, "set on a descriptor never made");
    expect(set(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
               &forged),
           CUDNN_STATUS_BAD_PARAM, "set of a descriptor never made into another");
    expect(set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &forged_handle),
           CUDNN_STATUS_BAD_PARAM, "set of a cuDNN handle never made");
    must(cudnnBackendDestroyDescriptor(t) == CUDNN_STATUS_SUCCESS, "destroy");
    expect(cudnnBackendDestroyDescriptor(t), CUDNN_STATUS_BAD_PARAM,
           "destroy of a destroyed descriptor");
    expect(set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid),
           CUDNN_STATUS_BAD_PARAM, "set on a destroyed descriptor");
    expect(cudnnBackendFinalize(t), CUDNN_STATUS_BAD_PARAM, "finalize of a destroyed descriptor");
    expect(get(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &count, &uid),
           CUDNN_STATUS_BAD_PARAM, "get on a destroyed descriptor");
    check(cudnnBackendDestroyDescriptor(NULL) != CUDNN_STATUS_SUCCESS,
          "destroy of NULL is refused", "it succeeded");
    must(cudnnBackendDestroyDescriptor(op) == CUDNN_STATUS_SUCCESS &&
             cudnnBackendDestroyDescriptor(graph) == CUDNN_STATUS_SUCCESS,
         "destroy");
}

int main(int argc, char **argv)
{
    int graphs = 3;
    const char *mode = argc > 1 ? argv[1] : "graphs";
    if (strcmp(mode, "graphs") == 0 && argc > 2)
        graphs = atoi(argv[2]);
    must(cudnnCreate(&handle) == CUDNN_STATUS_SUCCESS, "cudnnCreate");
    must(cudaStreamCreate(&stream) == cudaSuccess, "cudaStreamCreate");
    if (strcmp(mode, "deferred-errors") == 0) {
        deferred_errors(argc > 2 && strcmp(argv[2], "blocking") == 0);
    } else if (strcmp(mode, "bad-handles") == 0) {
        bad_handles();
    } else {
        std::vector<cudnnBackendDescriptor_t> plans, cfgs;
        for (int g = 0; g < graphs; g++) {
            cudnnBackendDescriptor_t cfg;
            plans.push_back(one_graph(g, &cfg));
            cfgs.push_back(cfg);
        }
        for (size_t i = 0; i < plans.size(); i++)
            must(cudnnBackendDestroyDescriptor(plans[i]) == CUDNN_STATUS_SUCCESS &&
                     cudnnBackendDestroyDescriptor(cfgs[i]) == CUDNN_STATUS_SUCCESS,
                 "destroy plans");
    }
    cudnnDestroy(handle);
    cudaStreamDestroy(stream);
    return check_exit_status();
}

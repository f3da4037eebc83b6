// CUDA graphs built node by node, as llama.cpp and hand-tuned pipelines
// build them: a graph of kernel, memset, memcpy, child-graph, empty and
// event nodes with an edge added afterwards, instantiated and launched; an
// LLM-decode-style loop that changes one kernel node's arguments every
// step, through cudaGraphExecKernelNodeSetParams and through
// cudaGraphExecUpdate with a new graph of the same shape; a clone; an
// update whose topology changed; the graph's dot description written to
// a file; memory alloc and free nodes; a 2D block copied by a 3D copy node; capture into an existing graph; and the driver API's equivalents
// (cuGraphCreate, cuGraphAddKernelNode, cuGraphInstantiateWithFlags,
// cuGraphLaunch) on kernels.cuh loaded as a fatbin.  Link with -lcuda.
//
//   graphs              everything above (the same output natively)
//   graphs bad-handles  also: a destroyed graph, executable graph and a
//                       destroyed graph's node give the invalid-handle
//                       error, a memset node past its memory invalid
//                       value, a copy node from host memory past its
//                       device memory invalid value (undefined natively:
//                       rgpu only)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cuda.h>
#include "check.h"
#include "kernels.cuh"
#include "kernels_fatbin.h"   // generated: const unsigned char kernels_fatbin[]

#define N 1000
#define THREADS 128
#define BLOCKS ((N + THREADS - 1) / THREADS)
#define STEPS 8

static const char AXPY[] = "_Z6k_axpyfPKfPfi";     // k_axpy(float, const float*, float*, int)

// Copies n ints back and checks they all equal want.
static void check_ints(const int *d, int want, const char *name)
{
    static int h[N];
    cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    int i = 0;
    while (e == cudaSuccess && i < N && h[i] == want)
        i++;
    check(e == cudaSuccess && i == N, name, "%s, element %d is %d, want %d",
          cudaGetErrorName(e), i, i < N ? h[i] : 0, want);
}

static void check_floats(const float *d, float want, const char *name)
{
    static float h[N];
    cudaError_t e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    int i = 0;
    while (e == cudaSuccess && i < N && h[i] == want)
        i++;
    check(e == cudaSuccess && i == N, name, "%s, element %d is %g, want %g",
          cudaGetErrorName(e), i, i < N ? (double)h[i] : 0.0, (double)want);
}

static struct cudaKernelNodeParams kernel_node(void *func, void **args)
{
    struct cudaKernelNodeParams p;
    memset(&p, 0, sizeof p);
    p.func = func;
    p.gridDim = dim3(BLOCKS);
    p.blockDim = dim3(THREADS);
    p.kernelParams = args;
    return p;
}

// Whether the dot file at path describes a graph with edges: "digraph"
// and "->" (the rest is the library's own, addresses included).
static bool dot_file_ok(const char *path)
{
    char buf[1 << 16];
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    remove(path);
    buf[n] = 0;
    return strstr(buf, "digraph") && strstr(buf, "->");
}

static const char *dot_path(char *buf, size_t n, const char *which)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, n, "%s/rgpu-graphs-%s-%d.dot", dir && *dir ? dir : "/tmp", which, (int)getpid());
    return buf;
}

// ---- a graph of every node kind served ---------------------------------------------

struct buffers {
    int *a, *b, *c;
    cudaEvent_t ev;
    cudaGraphNode_t set, sub, cpy, rec; // nodes the setters name
};

// memset a = 1 -> k_inc(a) -> child { k_double(b, a) } -> empty -> event
// record -> memcpy c = b, and k_inc(c) made without dependencies and tied
// after the copy with cudaGraphAddDependencies: c = 2 * 2 + 1 = 5.
static cudaGraph_t build_graph(struct buffers *B)
{
    cudaGraph_t g = NULL, child = NULL;
    cudaGraphNode_t set, inc, sub, empty, rec, cpy, inc2, dbl;
    int n = N;
    void *inc_args[] = { &B->a, &n };
    void *dbl_args[] = { &B->b, &B->a, &n };
    void *inc2_args[] = { &B->c, &n };
    struct cudaMemsetParams m;
    memset(&m, 0, sizeof m);
    m.dst = B->a;
    m.value = 1;
    m.elementSize = 4;
    m.width = N;
    m.height = 1;

    check_cuda(cudaGraphCreate(&g, 0), "cudaGraphCreate");
    check_cuda(cudaGraphAddMemsetNode(&set, g, NULL, 0, &m), "cudaGraphAddMemsetNode");
    struct cudaKernelNodeParams p = kernel_node((void *)k_inc, inc_args);
    check_cuda(cudaGraphAddKernelNode(&inc, g, &set, 1, &p), "cudaGraphAddKernelNode k_inc");
    check_cuda(cudaGraphCreate(&child, 0), "cudaGraphCreate child");
    p = kernel_node((void *)k_double, dbl_args);
    check_cuda(cudaGraphAddKernelNode(&dbl, child, NULL, 0, &p), "cudaGraphAddKernelNode child");
    check_cuda(cudaGraphAddChildGraphNode(&sub, g, &inc, 1, child), "cudaGraphAddChildGraphNode");
    check_cuda(cudaGraphDestroy(child), "cudaGraphDestroy child (the node holds a copy)");
    check_cuda(cudaGraphAddEmptyNode(&empty, g, &sub, 1), "cudaGraphAddEmptyNode");
    check_cuda(cudaGraphAddEventRecordNode(&rec, g, &empty, 1, B->ev),
               "cudaGraphAddEventRecordNode");
    check_cuda(cudaGraphAddMemcpyNode1D(&cpy, g, &rec, 1, B->c, B->b, N * sizeof(int),
                                        cudaMemcpyDeviceToDevice),
               "cudaGraphAddMemcpyNode1D");
    p = kernel_node((void *)k_inc, inc2_args);
    check_cuda(cudaGraphAddKernelNode(&inc2, g, NULL, 0, &p), "cudaGraphAddKernelNode no deps");
    check_cuda(cudaGraphAddDependencies(g, &cpy, &inc2, NULL, 1), "cudaGraphAddDependencies");

    enum cudaGraphNodeType t;
    check(cudaGraphNodeGetType(rec, &t) == cudaSuccess && t == cudaGraphNodeTypeEventRecord,
          "cudaGraphNodeGetType event record", "type %d", (int)t);
    check(cudaGraphNodeGetType(sub, &t) == cudaSuccess && t == cudaGraphNodeTypeGraph,
          "cudaGraphNodeGetType child graph", "type %d", (int)t);
    size_t count = 0;
    check(cudaGraphGetNodes(g, NULL, &count) == cudaSuccess && count == 7,
          "cudaGraphGetNodes counts 7", "count %zu", count);
    // The list: 7 nodes in an array of 8 (the last left NULL), among them
    // the event node; the one root is the memset.
    cudaGraphNode_t list[8];
    count = 8;
    bool has_rec = false;
    check_cuda(cudaGraphGetNodes(g, list, &count), "cudaGraphGetNodes with an array");
    for (size_t i = 0; i < count && i < 8; i++)
        has_rec = has_rec || list[i] == rec;
    check(count == 7 && list[7] == NULL && has_rec, "cudaGraphGetNodes lists the nodes",
          "count %zu, the event node %s", count, has_rec ? "listed" : "missing");
    check(cudaGraphNodeGetType(list[0], &t) == cudaSuccess, "cudaGraphNodeGetType of a listed node",
          "%s", "refused");
    count = 0;
    check(cudaGraphGetRootNodes(g, NULL, &count) == cudaSuccess && count == 1,
          "cudaGraphGetRootNodes counts 1", "count %zu", count);
    check(cudaGraphGetRootNodes(g, list, &count) == cudaSuccess && count == 1 && list[0] == set,
          "cudaGraphGetRootNodes: the memset", "count %zu", count);
    // The kernel node's parameters: the kernel as its host stub, the
    // arguments as they were given.
    struct cudaKernelNodeParams q;
    memset(&q, 0, sizeof q);
    cudaError_t qe = cudaGraphKernelNodeGetParams(inc, &q);
    check(qe == cudaSuccess && q.func == (void *)k_inc && q.gridDim.x == BLOCKS &&
              q.blockDim.x == THREADS && q.kernelParams && *(int **)q.kernelParams[0] == B->a &&
              *(int *)q.kernelParams[1] == N,
          "cudaGraphKernelNodeGetParams", "%s", cudaGetErrorName(qe));
    // 6 edges: memset->inc->child->empty->record->copy->inc2.
    cudaGraphNode_t from[8], to[8];
    cudaGraphEdgeData data[8];
    count = 0;
    check(cudaGraphGetEdges(g, NULL, NULL, NULL, &count) == cudaSuccess && count == 6,
          "cudaGraphGetEdges counts 6", "count %zu", count);
    count = 8;
    bool has_edge = false;
    check_cuda(cudaGraphGetEdges(g, from, to, data, &count), "cudaGraphGetEdges with arrays");
    for (size_t i = 0; i < count && i < 8; i++)
        has_edge = has_edge || (from[i] == cpy && to[i] == inc2 && data[i].type == 0);
    check(count == 6 && from[6] == NULL && has_edge, "cudaGraphGetEdges lists the added edge",
          "count %zu, copy -> inc2 %s", count, has_edge ? "listed" : "missing");
    B->set = set;
    B->sub = sub;
    B->rec = rec;
    B->cpy = cpy;
    return g;
}

static void run_graph(cudaGraph_t g, struct buffers *B, cudaStream_t s, const char *what,
                      bool with_params)
{
    cudaGraphExec_t x = NULL;
    char name[128];
    check_cuda(cudaMemset(B->c, 0, N * sizeof(int)), fmt_name(name, sizeof name, "%s: clear", what));
    if (with_params) {
        // Instantiated and uploaded on s in one call.
        cudaGraphInstantiateParams ip;
        memset(&ip, 0, sizeof ip);
        ip.flags = cudaGraphInstantiateFlagUpload;
        ip.uploadStream = s;
        ip.result_out = cudaGraphInstantiateError;
        check(cudaGraphInstantiateWithParams(&x, g, &ip) == cudaSuccess &&
                  ip.result_out == cudaGraphInstantiateSuccess,
              fmt_name(name, sizeof name, "%s: cudaGraphInstantiateWithParams upload", what),
              "result %d", (int)ip.result_out);
    } else {
        check_cuda(cudaGraphInstantiateWithFlags(&x, g, cudaGraphInstantiateFlagAutoFreeOnLaunch),
                   fmt_name(name, sizeof name, "%s: cudaGraphInstantiateWithFlags", what));
        check_cuda(cudaGraphUpload(x, s), fmt_name(name, sizeof name, "%s: cudaGraphUpload", what));
    }
    check_cuda(cudaGraphLaunch(x, s), fmt_name(name, sizeof name, "%s: cudaGraphLaunch", what));
    check_cuda(cudaStreamSynchronize(s), fmt_name(name, sizeof name, "%s: synchronize", what));
    check_ints(B->a, 2, fmt_name(name, sizeof name, "%s: memset then k_inc", what));
    check_ints(B->b, 4, fmt_name(name, sizeof name, "%s: child graph k_double", what));
    check_ints(B->c, 5, fmt_name(name, sizeof name, "%s: memcpy then k_inc after the edge", what));
    check_cuda(cudaEventQuery(B->ev), fmt_name(name, sizeof name, "%s: event recorded", what));
    check_cuda(cudaGraphExecDestroy(x), fmt_name(name, sizeof name, "%s: cudaGraphExecDestroy", what));
}

// An executable graph's memset, memcpy and child-graph nodes given new
// parameters: a = 3 -> k_inc: 4; the child doubles the first half of a
// into b (the rest of b keeps the last run's 4); the copy takes a: c = 4
// -> k_inc: 5.
static void test_exec_setters(cudaGraph_t g, struct buffers *B, cudaStream_t s)
{
    cudaGraphExec_t x = NULL;
    cudaGraph_t child = NULL;
    cudaGraphNode_t dbl;
    int half = N / 2;
    void *dbl_args[] = { &B->b, &B->a, &half };
    struct cudaMemsetParams m;
    memset(&m, 0, sizeof m);
    m.dst = B->a;
    m.value = 3;
    m.elementSize = 4;
    m.width = N;
    m.height = 1;
    check_cuda(cudaGraphInstantiate(&x, g, 0), "setters: cudaGraphInstantiate");
    check_cuda(cudaGraphExecMemsetNodeSetParams(x, B->set, &m), "cudaGraphExecMemsetNodeSetParams");
    check_cuda(cudaGraphExecMemcpyNodeSetParams1D(x, B->cpy, B->c, B->a, N * sizeof(int),
                                                  cudaMemcpyDeviceToDevice),
               "cudaGraphExecMemcpyNodeSetParams1D");
    check_cuda(cudaGraphCreate(&child, 0), "setters: cudaGraphCreate child");
    struct cudaKernelNodeParams p = kernel_node((void *)k_double, dbl_args);
    check_cuda(cudaGraphAddKernelNode(&dbl, child, NULL, 0, &p), "setters: child kernel node");
    check_cuda(cudaGraphExecChildGraphNodeSetParams(x, B->sub, child),
               "cudaGraphExecChildGraphNodeSetParams");
    // The record node records a new event in the executable graph, and
    // names it in the graph itself afterwards.
    cudaEvent_t ev2, got = NULL;
    check_cuda(cudaEventCreateWithFlags(&ev2, cudaEventDisableTiming), "setters: cudaEventCreate");
    check_cuda(cudaGraphExecEventRecordNodeSetEvent(x, B->rec, ev2),
               "cudaGraphExecEventRecordNodeSetEvent");
    check_cuda(cudaGraphLaunch(x, s), "setters: cudaGraphLaunch");
    check_cuda(cudaStreamSynchronize(s), "setters: synchronize");
    check_ints(B->a, 4, "setters: memset a = 3 then k_inc");
    check_ints(B->c, 5, "setters: memcpy from a then k_inc");
    int ends[2] = { 0, 0 };
    check(cudaMemcpy(&ends[0], B->b, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess &&
              cudaMemcpy(&ends[1], B->b + N - 1, sizeof(int), cudaMemcpyDeviceToHost) == cudaSuccess &&
              ends[0] == 8 && ends[1] == 4,
          "setters: the new child doubled the first half only", "b[0] %d, b[N-1] %d", ends[0], ends[1]);
    check_cuda(cudaEventQuery(ev2), "setters: the new event recorded");
    check_cuda(cudaGraphEventRecordNodeSetEvent(B->rec, ev2), "cudaGraphEventRecordNodeSetEvent");
    check(cudaGraphEventRecordNodeGetEvent(B->rec, &got) == cudaSuccess && got == ev2,
          "cudaGraphEventRecordNodeGetEvent names the new event", "%s", "another event");
    check_cuda(cudaGraphEventRecordNodeSetEvent(B->rec, B->ev), "setters: the old event back");
    check_cuda(cudaGraphDestroy(child), "setters: cudaGraphDestroy child");
    check_cuda(cudaGraphExecDestroy(x), "setters: cudaGraphExecDestroy");
    check_cuda(cudaEventDestroy(ev2), "setters: cudaEventDestroy");
}

static void test_hand_built(cudaStream_t s)
{
    struct buffers B;
    check_cuda(cudaMalloc(&B.a, N * sizeof(int)), "cudaMalloc a");
    check_cuda(cudaMalloc(&B.b, N * sizeof(int)), "cudaMalloc b");
    check_cuda(cudaMalloc(&B.c, N * sizeof(int)), "cudaMalloc c");
    check_cuda(cudaEventCreateWithFlags(&B.ev, cudaEventDisableTiming), "cudaEventCreate");
    cudaGraph_t g = build_graph(&B);
    run_graph(g, &B, s, "hand-built graph", false);
    char path[512];
    check(cudaGraphDebugDotPrint(g, dot_path(path, sizeof path, "rt"),
                                 cudaGraphDebugDotFlagsVerbose) == cudaSuccess &&
              dot_file_ok(path),
          "cudaGraphDebugDotPrint writes a digraph with edges", "no such file at %s", path);

    test_exec_setters(g, &B, s);

    cudaGraph_t clone = NULL;
    check_cuda(cudaGraphClone(&clone, g), "cudaGraphClone");
    check_cuda(cudaGraphDestroy(g), "cudaGraphDestroy original");
    run_graph(clone, &B, s, "clone", true);
    check_cuda(cudaGraphDestroy(clone), "cudaGraphDestroy clone");
    cudaEventDestroy(B.ev);
    cudaFree(B.a);
    cudaFree(B.b);
    cudaFree(B.c);
}

// ---- memory nodes ---------------------------------------------------------------------

// alloc m -> memset m = 7 -> k_inc(m) -> copy c = m -> free m: c = 8.
static void test_mem_nodes(cudaStream_t s)
{
    int *c, n = N;
    cudaGraph_t g = NULL;
    cudaGraphNode_t alloc, set, inc, cpy, fre;
    cudaGraphExec_t x = NULL;
    check_cuda(cudaMalloc(&c, N * sizeof(int)), "mem nodes: cudaMalloc");
    check_cuda(cudaMemset(c, 0, N * sizeof(int)), "mem nodes: c = 0");
    check_cuda(cudaGraphCreate(&g, 0), "mem nodes: cudaGraphCreate");
    struct cudaMemAllocNodeParams ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps.allocType = cudaMemAllocationTypePinned;
    ap.poolProps.location.type = cudaMemLocationTypeDevice;
    ap.poolProps.location.id = 0;
    ap.bytesize = N * sizeof(int);
    check(cudaGraphAddMemAllocNode(&alloc, g, NULL, 0, &ap) == cudaSuccess && ap.dptr,
          "cudaGraphAddMemAllocNode", "%s", "no address");
    int *m = (int *)ap.dptr;
    struct cudaMemsetParams mp;
    memset(&mp, 0, sizeof mp);
    mp.dst = m;
    mp.value = 7;
    mp.elementSize = 4;
    mp.width = N;
    mp.height = 1;
    check_cuda(cudaGraphAddMemsetNode(&set, g, &alloc, 1, &mp), "mem nodes: memset node");
    void *args[] = { &m, &n };
    struct cudaKernelNodeParams kp = kernel_node((void *)k_inc, args);
    check_cuda(cudaGraphAddKernelNode(&inc, g, &set, 1, &kp), "mem nodes: kernel node");
    check_cuda(cudaGraphAddMemcpyNode1D(&cpy, g, &inc, 1, c, m, N * sizeof(int),
                                        cudaMemcpyDeviceToDevice), "mem nodes: memcpy node");
    check_cuda(cudaGraphAddMemFreeNode(&fre, g, &cpy, 1, m), "cudaGraphAddMemFreeNode");
    enum cudaGraphNodeType t;
    check(cudaGraphNodeGetType(alloc, &t) == cudaSuccess && t == cudaGraphNodeTypeMemAlloc,
          "mem nodes: the alloc node's type", "type %d", (int)t);
    check_cuda(cudaGraphInstantiate(&x, g, 0), "mem nodes: cudaGraphInstantiate");
    check_cuda(cudaGraphLaunch(x, s), "mem nodes: cudaGraphLaunch");
    check_cuda(cudaStreamSynchronize(s), "mem nodes: synchronize");
    check_ints(c, 8, "mem nodes: c = 7 + 1");
    check_cuda(cudaGraphExecDestroy(x), "mem nodes: cudaGraphExecDestroy");
    check_cuda(cudaGraphDestroy(g), "mem nodes: cudaGraphDestroy");
    cudaFree(c);
}

// ---- a 3D copy node --------------------------------------------------------------------

// Rows of 100 ints: a block of 3 rows of 20 from row 1, column 10 of src
// to the corner of dst; the rest of dst stays 0.
static void test_copy3d(cudaStream_t s)
{
    static int h[N];
    int *src, *dst;
    cudaGraph_t g = NULL;
    cudaGraphNode_t node;
    cudaGraphExec_t x = NULL;
    for (int i = 0; i < N; i++)
        h[i] = i;
    check_cuda(cudaMalloc(&src, N * sizeof(int)), "copy3d: cudaMalloc src");
    check_cuda(cudaMalloc(&dst, N * sizeof(int)), "copy3d: cudaMalloc dst");
    check_cuda(cudaMemcpy(src, h, sizeof h, cudaMemcpyHostToDevice), "copy3d: src = i");
    check_cuda(cudaMemset(dst, 0, N * sizeof(int)), "copy3d: dst = 0");
    struct cudaMemcpy3DParms p;
    memset(&p, 0, sizeof p);
    p.srcPtr = make_cudaPitchedPtr(src, 100 * sizeof(int), 100, 10);
    p.dstPtr = make_cudaPitchedPtr(dst, 100 * sizeof(int), 100, 10);
    p.srcPos = make_cudaPos(10 * sizeof(int), 1, 0);
    p.dstPos = make_cudaPos(0, 0, 0);
    p.extent = make_cudaExtent(20 * sizeof(int), 3, 1);
    p.kind = cudaMemcpyDeviceToDevice;
    check_cuda(cudaGraphCreate(&g, 0), "copy3d: cudaGraphCreate");
    check_cuda(cudaGraphAddMemcpyNode(&node, g, NULL, 0, &p), "cudaGraphAddMemcpyNode 2D block");
    check_cuda(cudaGraphInstantiate(&x, g, 0), "copy3d: cudaGraphInstantiate");
    check_cuda(cudaGraphLaunch(x, s), "copy3d: cudaGraphLaunch");
    check_cuda(cudaStreamSynchronize(s), "copy3d: synchronize");
    cudaError_t e = cudaMemcpy(h, dst, sizeof h, cudaMemcpyDeviceToHost);
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++) {
        int r = i / 100, c = i % 100;
        int want = r < 3 && c < 20 ? (r + 1) * 100 + 10 + c : 0;
        if (h[i] != want)
            bad = i;
    }
    check(e == cudaSuccess && bad < 0, "copy3d: the block and nothing else", "%s, element %d is %d",
          cudaGetErrorName(e), bad, bad >= 0 ? h[bad] : 0);
    check_cuda(cudaGraphExecDestroy(x), "copy3d: cudaGraphExecDestroy");
    check_cuda(cudaGraphDestroy(g), "copy3d: cudaGraphDestroy");
    cudaFree(src);
    cudaFree(dst);
}

// ---- the decode loop ----------------------------------------------------------------

// One k_axpy node: y = a * x + y.
static cudaGraph_t axpy_graph(float *a, float **x, float **y, int *n, cudaGraphNode_t *node)
{
    cudaGraph_t g = NULL;
    void *args[] = { a, x, y, n };
    struct cudaKernelNodeParams p = kernel_node((void *)k_axpy, args);
    check_cuda(cudaGraphCreate(&g, 0), "decode: cudaGraphCreate");
    check_cuda(cudaGraphAddKernelNode(node, g, NULL, 0, &p), "decode: cudaGraphAddKernelNode");
    return g;
}

// Step t adds (t + 1) * 1.0 to y: after step t, y = (t + 1)(t + 2) / 2.
// Even steps set the node's arguments in the executable graph, odd steps
// update it from a new graph of the same shape, as llama.cpp does when its
// graph's arguments change between tokens.
static void test_decode(cudaStream_t s)
{
    float *x, *y, a = 1.0f;
    int n = N;
    cudaGraphNode_t node;
    cudaGraphExec_t exec = NULL;
    char name[128];
    static float ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;
    check_cuda(cudaMalloc(&x, N * sizeof(float)), "decode: cudaMalloc x");
    check_cuda(cudaMalloc(&y, N * sizeof(float)), "decode: cudaMalloc y");
    check_cuda(cudaMemcpy(x, ones, sizeof ones, cudaMemcpyHostToDevice), "decode: x = 1");
    check_cuda(cudaMemset(y, 0, N * sizeof(float)), "decode: y = 0");
    cudaGraph_t g = axpy_graph(&a, &x, &y, &n, &node);
    check_cuda(cudaGraphInstantiate(&exec, g, 0), "decode: cudaGraphInstantiate");

    float want = 0.0f;
    for (int t = 0; t < STEPS; t++) {
        a = (float)(t + 1);
        if (t % 2 == 0) {
            void *args[] = { &a, &x, &y, &n };
            struct cudaKernelNodeParams p = kernel_node((void *)k_axpy, args);
            check_cuda(cudaGraphExecKernelNodeSetParams(exec, node, &p),
                       fmt_name(name, sizeof name, "decode step %d: cudaGraphExecKernelNodeSetParams", t));
        } else {
            cudaGraphNode_t n2;
            cudaGraph_t g2 = axpy_graph(&a, &x, &y, &n, &n2);
            cudaGraphExecUpdateResultInfo info;
            memset(&info, 0, sizeof info);
            cudaError_t e = cudaGraphExecUpdate(exec, g2, &info);
            check(e == cudaSuccess && info.result == cudaGraphExecUpdateSuccess,
                  fmt_name(name, sizeof name, "decode step %d: cudaGraphExecUpdate", t),
                  "%s, result %d", cudaGetErrorName(e), (int)info.result);
            check_cuda(cudaGraphDestroy(g2), "decode: cudaGraphDestroy update");
        }
        check_cuda(cudaGraphLaunch(exec, s), fmt_name(name, sizeof name, "decode step %d: launch", t));
        check_cuda(cudaStreamSynchronize(s), fmt_name(name, sizeof name, "decode step %d: sync", t));
        want += a;
        check_floats(y, want, fmt_name(name, sizeof name, "decode step %d: y", t));
    }

    // Two nodes where the executable graph has one: the update fails and
    // says why; the executable graph still runs as before.
    cudaGraphNode_t n2, extra;
    cudaGraph_t g3 = axpy_graph(&a, &x, &y, &n, &n2);
    check_cuda(cudaGraphAddEmptyNode(&extra, g3, &n2, 1), "topology: cudaGraphAddEmptyNode");
    cudaGraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    check_err(cudaGraphExecUpdate(exec, g3, &info), cudaErrorGraphExecUpdateFailure,
              "topology changed: cudaGraphExecUpdate");
    check(info.result == cudaGraphExecUpdateErrorTopologyChanged,
          "topology changed: result info says so", "result %d", (int)info.result);
    cudaGetLastError();
    check_cuda(cudaGraphLaunch(exec, s), "topology changed: launch the old graph");
    check_cuda(cudaStreamSynchronize(s), "topology changed: sync");
    want += a;
    check_floats(y, want, "topology changed: y");

    check_cuda(cudaGraphDestroy(g3), "cudaGraphDestroy topology");
    check_cuda(cudaGraphExecDestroy(exec), "decode: cudaGraphExecDestroy");
    check_cuda(cudaGraphDestroy(g), "decode: cudaGraphDestroy");
    cudaFree(x);
    cudaFree(y);
}

// ---- capture into an existing graph ----------------------------------------------

// An empty node, then k_inc captured after it into the same graph: two
// launches of the graph make a = 2.  A device without stream capture says
// so and stops here (the fake GPU captures: tests/fakegpu/capture.c).
static void test_capture_to_graph(cudaStream_t s)
{
    int *a;
    int n = N;
    cudaGraph_t g = NULL, got = NULL;
    cudaGraphNode_t first;
    cudaGraphExec_t x = NULL;
    check_cuda(cudaMalloc(&a, N * sizeof(int)), "capture: cudaMalloc");
    check_cuda(cudaMemset(a, 0, N * sizeof(int)), "capture: a = 0");
    check_cuda(cudaGraphCreate(&g, 0), "capture: cudaGraphCreate");
    check_cuda(cudaGraphAddEmptyNode(&first, g, NULL, 0), "capture: cudaGraphAddEmptyNode");
    cudaError_t e = cudaStreamBeginCaptureToGraph(s, g, &first, NULL, 1,
                                                  cudaStreamCaptureModeGlobal);
    if (e == cudaErrorNotSupported || e == cudaErrorSymbolNotFound) {
        printf("skip capture into a graph: %s (no stream capture on this device)\n",
               cudaGetErrorName(e));
        cudaGetLastError();
    } else if (check_cuda(e, "capture: cudaStreamBeginCaptureToGraph")) {
        enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
        check(cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive,
              "capture: cudaStreamIsCapturing", "status %d", (int)st);
        k_inc<<<BLOCKS, THREADS, 0, s>>>(a, n);
        check_cuda(cudaGetLastError(), "capture: k_inc captured");
        check(cudaStreamEndCapture(s, &got) == cudaSuccess && got == g,
              "capture: cudaStreamEndCapture answers the graph captured into", "another graph");
        size_t count = 0;
        check(cudaGraphGetNodes(g, NULL, &count) == cudaSuccess && count == 2,
              "capture: the graph holds both nodes", "count %zu", count);
        check_cuda(cudaGraphInstantiate(&x, g, 0), "capture: cudaGraphInstantiate");
        check_cuda(cudaGraphLaunch(x, s), "capture: launch 1");
        check_cuda(cudaGraphLaunch(x, s), "capture: launch 2");
        check_cuda(cudaStreamSynchronize(s), "capture: sync");
        check_ints(a, 2, "capture: k_inc ran once per launch");
        check_cuda(cudaGraphExecDestroy(x), "capture: cudaGraphExecDestroy");
    }
    check_cuda(cudaGraphDestroy(g), "capture: cudaGraphDestroy");
    cudaFree(a);
}

// ---- destroyed handles (rgpu only: undefined natively) -------------------------------

static void test_bad_handles(cudaStream_t s)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaGraphNode_t a, b, c;
    check_cuda(cudaGraphCreate(&g, 0), "bad: cudaGraphCreate");
    check_cuda(cudaGraphAddEmptyNode(&a, g, NULL, 0), "bad: empty node a");
    check_cuda(cudaGraphAddEmptyNode(&b, g, NULL, 0), "bad: empty node b");
    check_cuda(cudaGraphInstantiate(&x, g, 0), "bad: cudaGraphInstantiate");
    check_cuda(cudaGraphExecDestroy(x), "bad: cudaGraphExecDestroy");
    check_err(cudaGraphLaunch(x, s), cudaErrorInvalidResourceHandle,
              "bad: cudaGraphLaunch of a destroyed executable graph");
    cudaGetLastError();
    check_cuda(cudaGraphDestroy(g), "bad: cudaGraphDestroy");
    check_err(cudaGraphAddEmptyNode(&c, g, NULL, 0), cudaErrorInvalidResourceHandle,
              "bad: cudaGraphAddEmptyNode to a destroyed graph");
    cudaGetLastError();
    check_err(cudaGraphInstantiate(&x, g, 0), cudaErrorInvalidResourceHandle,
              "bad: cudaGraphInstantiate of a destroyed graph");
    cudaGetLastError();
    cudaGraph_t g2 = NULL;
    check_cuda(cudaGraphCreate(&g2, 0), "bad: another graph");
    check_err(cudaGraphAddEmptyNode(&c, g2, &a, 1), cudaErrorInvalidResourceHandle,
              "bad: a destroyed graph's node as a dependency");
    cudaGetLastError();
    check_err(cudaGraphAddDependencies(g2, &a, &b, NULL, 1), cudaErrorInvalidResourceHandle,
              "bad: cudaGraphAddDependencies of a destroyed graph's nodes");
    cudaGetLastError();
    int n = N;
    int *p = NULL;
    void *args[] = { &p, &n };
    struct cudaKernelNodeParams kp = kernel_node((void *)k_inc, args);
    check_err(cudaGraphAddKernelNode(&c, g, NULL, 0, &kp), cudaErrorInvalidResourceHandle,
              "bad: cudaGraphAddKernelNode to a destroyed graph");
    cudaGetLastError();
    cudaStream_t dead;
    check_cuda(cudaStreamCreate(&dead), "bad: cudaStreamCreate");
    check_cuda(cudaStreamDestroy(dead), "bad: cudaStreamDestroy");
    cudaGraphInstantiateParams ip;
    memset(&ip, 0, sizeof ip);
    ip.flags = cudaGraphInstantiateFlagUpload;
    ip.uploadStream = dead;
    check_err(cudaGraphInstantiateWithParams(&x, g2, &ip), cudaErrorInvalidResourceHandle,
              "bad: cudaGraphInstantiateWithParams with a destroyed upload stream");
    cudaGetLastError();
    // A memset node reaching past its allocation, and a copy node from a
    // host buffer into more device memory than there is.
    int *dev;
    static int host[N];
    check_cuda(cudaMalloc(&dev, N * sizeof(int)), "bad: cudaMalloc");
    struct cudaMemsetParams m;
    memset(&m, 0, sizeof m);
    m.dst = dev + 1;
    m.elementSize = 4;
    m.width = N;
    m.height = 1;
    check_err(cudaGraphAddMemsetNode(&c, g2, NULL, 0, &m), cudaErrorInvalidValue,
              "bad: a memset node past its allocation");
    cudaGetLastError();
    check_err(cudaGraphAddMemcpyNode1D(&c, g2, NULL, 0, dev + 1, host, sizeof host,
                                       cudaMemcpyHostToDevice),
              cudaErrorInvalidValue, "bad: a copy node from host memory past its device memory");
    cudaGetLastError();
    cudaFree(dev);
    check_cuda(cudaGraphDestroy(g2), "bad: cudaGraphDestroy another");
}

// ---- the driver API ------------------------------------------------------------------

static void test_driver(const void *image)
{
    CUmodule mod;
    CUfunction f;
    CUdeviceptr x, y;
    CUgraph g = NULL;
    CUgraphNode k, e;
    CUgraphExec exec = NULL;
    float a = 2.0f;
    int n = N;
    static float ones[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1.0f;

    if (!check_cu(cuModuleLoadData(&mod, image), "driver: cuModuleLoadData") ||
        !check_cu(cuModuleGetFunction(&f, mod, AXPY), "driver: cuModuleGetFunction k_axpy"))
        return;
    check_cu(cuMemAlloc(&x, N * sizeof(float)), "driver: cuMemAlloc x");
    check_cu(cuMemAlloc(&y, N * sizeof(float)), "driver: cuMemAlloc y");
    check_cu(cuMemcpyHtoD(x, ones, sizeof ones), "driver: x = 1");
    check_cu(cuMemsetD32(y, 0, N), "driver: y = 0");

    void *args[] = { &a, &x, &y, &n };
    CUDA_KERNEL_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.func = f;
    p.gridDimX = BLOCKS;
    p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = THREADS;
    p.blockDimY = p.blockDimZ = 1;
    p.kernelParams = args;
    check_cu(cuGraphCreate(&g, 0), "driver: cuGraphCreate");
    check_cu(cuGraphAddKernelNode(&k, g, NULL, 0, &p), "driver: cuGraphAddKernelNode");
    check_cu(cuGraphAddEmptyNode(&e, g, &k, 1), "driver: cuGraphAddEmptyNode");
    CUDA_KERNEL_NODE_PARAMS q;
    memset(&q, 0, sizeof q);
    CUresult qr = cuGraphKernelNodeGetParams(k, &q);
    check(qr == CUDA_SUCCESS && q.func == f && q.gridDimX == BLOCKS && q.kernelParams &&
              *(float *)q.kernelParams[0] == 2.0f && *(CUdeviceptr *)q.kernelParams[2] == y,
          "driver: cuGraphKernelNodeGetParams", "status %d", (int)qr);
    char path[512];
    check(cuGraphDebugDotPrint(g, dot_path(path, sizeof path, "drv"), 0) == CUDA_SUCCESS &&
              dot_file_ok(path),
          "driver: cuGraphDebugDotPrint writes a digraph with edges", "no such file at %s", path);
    check_cu(cuGraphInstantiateWithFlags(&exec, g, 0), "driver: cuGraphInstantiateWithFlags");
    check_cu(cuGraphLaunch(exec, NULL), "driver: cuGraphLaunch");
    check_cu(cuCtxSynchronize(), "driver: cuCtxSynchronize");
    check_floats((const float *)(uintptr_t)y, 2.0f, "driver: y = 2x");

    a = 3.0f;
    check_cu(cuGraphExecKernelNodeSetParams(exec, k, &p), "driver: cuGraphExecKernelNodeSetParams");
    check_cu(cuGraphLaunch(exec, NULL), "driver: cuGraphLaunch again");
    check_cu(cuCtxSynchronize(), "driver: cuCtxSynchronize again");
    check_floats((const float *)(uintptr_t)y, 5.0f, "driver: y = 2x + 3x");

    check_cu(cuGraphExecDestroy(exec), "driver: cuGraphExecDestroy");
    check_cu(cuGraphDestroy(g), "driver: cuGraphDestroy");
    cuMemFree(x);
    cuMemFree(y);
    check_cu(cuModuleUnload(mod), "driver: cuModuleUnload");
}

int main(int argc, char **argv)
{
    cudaStream_t s;
    // The generated array has no alignment guarantee; the fatbin header
    // holds 64-bit fields, so hand the driver an 8-aligned copy.
    void *image = malloc(sizeof kernels_fatbin);
    memcpy(image, kernels_fatbin, sizeof kernels_fatbin);

    if (!check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"))
        return 1;
    test_hand_built(s);
    test_mem_nodes(s);
    test_copy3d(s);
    test_decode(s);
    test_driver(image);
    test_capture_to_graph(s);
    if (argc > 1 && strcmp(argv[1], "bad-handles") == 0)
        test_bad_handles(s);
    check_cuda(cudaStreamDestroy(s), "cudaStreamDestroy");
    free(image);
    return check_failures ? 1 : 0;
}

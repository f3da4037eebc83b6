// Stream capture queried for its dependencies, as a program that splices
// nodes of its own into a capture does: cudaStreamGetCaptureInfo with the
// dependency arrays (and edge data) after a kernel and after a fork over
// ten streams that joins back, the array handed back passed straight to
// cudaGraphAddEmptyNode and made the capture's dependency, then an if node
// added after the kernel that sets its condition, its body captured with
// cudaStreamBeginCaptureToGraph; the captured graph runs twice, once with
// the condition true and once false.  The driver's cuStreamGetCaptureInfo
// (_v3 with edges, _v2 without) answers the same.
#include <stdio.h>
#include <string.h>
#include <cuda.h>
#include "check.h"
#include "kernels.cuh"

#define N 256
#define BRANCHES 10

struct capture_state {
    enum cudaStreamCaptureStatus status;
    unsigned long long id;
    cudaGraph_t graph;
    const cudaGraphNode_t *deps;
    size_t n;
};

static bool query(cudaStream_t s, struct capture_state *c, const char *name)
{
    memset(c, 0, sizeof *c);
    return check_cuda(cudaStreamGetCaptureInfo(s, &c->status, &c->id, &c->graph, &c->deps, NULL,
                                               &c->n), name) &&
           check(c->status == cudaStreamCaptureStatusActive, name, "status %d", (int)c->status);
}

static bool is_kernel_node(cudaGraphNode_t node)
{
    enum cudaGraphNodeType t = cudaGraphNodeTypeEmpty;
    return cudaGraphNodeGetType(node, &t) == cudaSuccess && t == cudaGraphNodeTypeKernel;
}

static bool contains(const cudaGraphNode_t *deps, size_t n, cudaGraphNode_t node)
{
    for (size_t i = 0; i < n; i++)
        if (deps[i] == node)
            return true;
    return false;
}

static int read_int(const int *d)
{
    int v = -1;
    cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost);
    return v;
}

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

// Ten streams each run a kernel of their own after the capture's kernel and
// join back; every branch's node must be among the dependencies after.
static void fork_and_join(cudaStream_t s, int *y[BRANCHES])
{
    cudaStream_t b[BRANCHES];
    cudaEvent_t forked, joined[BRANCHES];
    cudaGraphNode_t branch_node[BRANCHES];
    struct capture_state c;
    check_cuda(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(forked, s), "cudaEventRecord (fork)");
    bool ok = true;
    for (int i = 0; i < BRANCHES; i++) {
        ok &= cudaStreamCreateWithFlags(&b[i], cudaStreamNonBlocking) == cudaSuccess;
        ok &= cudaEventCreateWithFlags(&joined[i], cudaEventDisableTiming) == cudaSuccess;
        ok &= cudaStreamWaitEvent(b[i], forked, 0) == cudaSuccess;
        k_inc<<<1, N, 0, b[i]>>>(y[i], N);
        ok &= cudaStreamGetCaptureInfo(b[i], &c.status, NULL, NULL, &c.deps, NULL, &c.n) ==
                  cudaSuccess &&
              c.n == 1 && is_kernel_node(c.deps[0]);
        branch_node[i] = ok ? c.deps[0] : NULL;
        ok &= cudaEventRecord(joined[i], b[i]) == cudaSuccess;
        ok &= cudaStreamWaitEvent(s, joined[i], 0) == cudaSuccess;
    }
    check(ok, "ten branches forked from the capture, each one kernel node deep", "a call failed");
    // Copied out: the next call on the stream ends the array's validity.
    cudaGraphNode_t joined_deps[4 * BRANCHES];
    size_t njoined = 0;
    if (query(s, &c, "cudaStreamGetCaptureInfo after the join")) {
        bool all = c.n >= BRANCHES && c.n <= 4 * BRANCHES;
        for (int i = 0; i < BRANCHES && all; i++)
            all = contains(c.deps, c.n, branch_node[i]);
        check(all, "every branch's node is a dependency after the join", "%zu dependencies",
              c.n);
        njoined = c.n <= 4 * BRANCHES ? c.n : 0;
        memcpy(joined_deps, c.deps, njoined * sizeof *joined_deps);
    }

    // The same with edge data: all default edges.
    const cudaGraphEdgeData *edges = NULL;
    const cudaGraphNode_t *deps = NULL;
    size_t n = 0;
    if (check_cuda(cudaStreamGetCaptureInfo(s, &c.status, NULL, NULL, &deps, &edges, &n),
                   "cudaStreamGetCaptureInfo with edge data")) {
        // All default edges (an array of zeros; NULL would say as much).
        bool plain = n >= BRANCHES;
        for (size_t i = 0; plain && edges && i < n; i++)
            plain = edges[i].from_port == 0 && edges[i].to_port == 0 &&
                    edges[i].type == cudaGraphDependencyTypeDefault;
        check(plain, "edge data of the join: default edges", "%zu", n);
        check(n == njoined && memcmp(deps, joined_deps, n * sizeof *deps) == 0,
              "the same dependencies with edge data", "%zu against %zu", n, njoined);
    }
    for (int i = 0; i < BRANCHES; i++) {
        cudaStreamDestroy(b[i]);
        cudaEventDestroy(joined[i]);
    }
    cudaEventDestroy(forked);
}

static cudaGraph_t capture(cudaStream_t s, int *x, int *y[BRANCHES], int *sel)
{
    struct capture_state c, again;
    cudaGraph_t graph = NULL;
    if (!check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
                    "cudaStreamBeginCapture"))
        return NULL;
    if (query(s, &c, "cudaStreamGetCaptureInfo at the start"))
        check(c.n == 0 && c.graph != NULL, "no dependencies at the start, and the graph",
              "%zu", c.n);

    k_inc<<<1, N, 0, s>>>(x, N);
    if (query(s, &c, "cudaStreamGetCaptureInfo after a kernel")) {
        check(c.n == 1 && is_kernel_node(c.deps[0]), "one dependency, the kernel's node",
              "%zu", c.n);
        // The array is valid until the next call on the stream: copied out first.
        cudaGraphNode_t first = c.n ? c.deps[0] : NULL;
        query(s, &again, "cudaStreamGetCaptureInfo again");
        check(again.id == c.id && again.graph == c.graph && again.n == 1 &&
                  again.deps[0] == first,
              "asked again: the same capture, graph and node", "n %zu", again.n);
    }

    fork_and_join(s, y);

    // The array handed back goes straight to a graph call, as CUDA allows.
    cudaGraphNode_t join;
    if (query(s, &c, "cudaStreamGetCaptureInfo before the empty node") &&
        check_cuda(cudaGraphAddEmptyNode(&join, c.graph, c.deps, c.n),
                   "cudaGraphAddEmptyNode on the dependency array") &&
        check_cuda(cudaStreamUpdateCaptureDependencies(s, &join, NULL, 1,
                                                       cudaStreamSetCaptureDependencies),
                   "cudaStreamUpdateCaptureDependencies to the empty node") &&
        query(s, &c, "cudaStreamGetCaptureInfo after the update"))
        check(c.n == 1 && c.deps[0] == join, "the empty node is the one dependency", "%zu",
              c.n);

    // A kernel sets a condition; an if node after it, its body captured.
    cudaGraphConditionalHandle h;
    cudaGraphNode_t cond;
    cudaStream_t body_stream;
    cudaGraph_t body_out = NULL;
    check_cuda(cudaGraphConditionalHandleCreate(&h, c.graph, 0, cudaGraphCondAssignDefault),
               "cudaGraphConditionalHandleCreate on the capture's graph");
    k_set_cond<<<1, 1, 0, s>>>(sel, h);
    struct cudaGraphNodeParams p = { cudaGraphNodeTypeConditional };
    p.conditional.handle = h;
    p.conditional.type = cudaGraphCondTypeIf;
    p.conditional.size = 1;
    if (query(s, &c, "cudaStreamGetCaptureInfo before the if node") &&
        check_cuda(cudaGraphAddNode(&cond, c.graph, c.deps, NULL, c.n, &p),
                   "cudaGraphAddNode if on the dependency array") &&
        check_cuda(cudaStreamCreateWithFlags(&body_stream, cudaStreamNonBlocking),
                   "cudaStreamCreate (body)") &&
        check_cuda(cudaStreamBeginCaptureToGraph(body_stream, p.conditional.phGraph_out[0],
                                                 NULL, NULL, 0, cudaStreamCaptureModeGlobal),
                   "cudaStreamBeginCaptureToGraph into the if's body")) {
        k_inc<<<1, N, 0, body_stream>>>(x, N);
        check_cuda(cudaStreamEndCapture(body_stream, &body_out), "cudaStreamEndCapture (body)");
        check(body_out == p.conditional.phGraph_out[0], "the body capture ends in the body",
              "another graph");
        cudaStreamDestroy(body_stream);
        check_cuda(cudaStreamUpdateCaptureDependencies(s, &cond, NULL, 1,
                                                       cudaStreamSetCaptureDependencies),
                   "cudaStreamUpdateCaptureDependencies to the if node");
    }
    k_inc<<<1, N, 0, s>>>(x, N);
    check_cuda(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
    return graph;
}

// cuStreamGetCaptureInfo as CUDA 12.0 to 12.2 declared it (its _v2), which
// programs built then reach through cuGetProcAddress.
typedef CUresult (*capture_info_v2)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                                    const CUgraphNode **, size_t *);

// The driver's queries: _v3 with edge data, _v2 without.
static void driver_queries(cudaStream_t s, int *x)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult found;
    if (!check_cu(cuGetProcAddress("cuStreamGetCaptureInfo", &fn, 12000,
                                   CU_GET_PROC_ADDRESS_DEFAULT, &found),
                  "cuGetProcAddress cuStreamGetCaptureInfo for CUDA 12.0") || !fn)
        return;
    capture_info_v2 get_capture_info_v2 = (capture_info_v2)fn;
    CUstreamCaptureStatus st;
    cuuint64_t id3 = 0, id2 = 0;
    CUgraph g3 = NULL, g2 = NULL, graph = NULL;
    const CUgraphNode *d3 = NULL, *d2 = NULL;
    const CUgraphEdgeData *e3 = NULL;
    size_t n3 = 0, n2 = 0;
    CUstream cs = (CUstream)s;
    if (!check_cu(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL),
                  "cuStreamBeginCapture"))
        return;
    k_inc<<<1, N, 0, s>>>(x, N);
    k_inc<<<1, N, 0, s>>>(x, N);
    if (check_cu(cuStreamGetCaptureInfo_v3(cs, &st, &id3, &g3, &d3, &e3, &n3),
                 "cuStreamGetCaptureInfo_v3") &&
        check_cu(get_capture_info_v2(cs, &st, &id2, &g2, &d2, &n2),
                 "cuStreamGetCaptureInfo_v2")) {
        CUgraphNodeType t = CU_GRAPH_NODE_TYPE_EMPTY;
        check(n3 == 1 && (!e3 || e3[0].type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) &&
                  cuGraphNodeGetType(d3[0], &t) == CUDA_SUCCESS &&
                  t == CU_GRAPH_NODE_TYPE_KERNEL,
              "the driver's _v3: one kernel node, a default edge", "%zu", n3);
        check(n2 == 1 && d2[0] == d3[0] && id2 == id3 && g2 == g3,
              "the driver's _v2 answers the same", "%zu", n2);
    }
    check_cu(cuStreamEndCapture(cs, &graph), "cuStreamEndCapture");
    if (graph)
        cuGraphDestroy(graph);
}

int main(void)
{
    int *x = NULL, *sel = NULL, *y[BRANCHES];
    cudaStream_t s;
    check_cuda(cudaMalloc((void **)&x, N * sizeof(int)), "cudaMalloc x");
    check_cuda(cudaMalloc((void **)&sel, sizeof(int)), "cudaMalloc sel");
    check_cuda(cudaMemset(x, 0, N * sizeof(int)), "cudaMemset x");
    for (int i = 0; i < BRANCHES; i++) {
        check_cuda(cudaMalloc((void **)&y[i], N * sizeof(int)), "cudaMalloc y");
        check_cuda(cudaMemset(y[i], 0, N * sizeof(int)), "cudaMemset y");
    }
    check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");

    cudaGraph_t graph = capture(s, x, y, sel);
    cudaGraphExec_t exec;
    if (graph && check_cuda(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate")) {
        int one = 1, zero = 0;
        cudaMemcpy(sel, &one, sizeof one, cudaMemcpyHostToDevice);
        check_cuda(cudaGraphLaunch(exec, s), "cudaGraphLaunch (condition true)");
        check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        check_ints(x, 3, "the graph ran its kernels and the if's body");
        cudaMemcpy(sel, &zero, sizeof zero, cudaMemcpyHostToDevice);
        check_cuda(cudaGraphLaunch(exec, s), "cudaGraphLaunch (condition false)");
        check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        check_ints(x, 5, "the second run left the if's body out");
        for (int i = 0; i < BRANCHES; i++)
            check_ints(y[i], 2, "each branch ran once per launch");
        check(read_int(sel) == 0, "the condition's input kept", "changed");
        cudaGraphExecDestroy(exec);
    }
    if (graph)
        cudaGraphDestroy(graph);

    driver_queries(s, x);

    cudaStreamDestroy(s);
    for (int i = 0; i < BRANCHES; i++)
        cudaFree(y[i]);
    cudaFree(x);
    cudaFree(sel);
    return check_exit_status();
}

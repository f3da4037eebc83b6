/* CUDA graphs built node by node through the driver, through rgpu's own
 * graph procedures (codegen/cuda_own.h, "graphs"): kernel nodes, whose
 * arguments travel packed by the function's layout (or as the caller's
 * own `extra` buffer), as cuLaunchKernel's do, and come back packed when
 * queried; node and edge lists, memory-allocation nodes and the dot
 * description, as the runtime's (the client side both share:
 * stubs/graph_lists.h; memcpy and host nodes: stubs/cuda_graph_host.c);
 * and stream capture, counted on the client as the runtime's is (a
 * statically linked runtime builds and captures its graphs through
 * these).  Server side: daemon/hand_graphs.c; the rest of the graph calls
 * are generated (codegen/cuda.ann). */
#include "rgpu_client.h"
#include "graph_lists.h"
#include "graph_params.h"
#include "cuda_own.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

CUresult rgpu_cuda_pack_params(CUfunction f, void **kernelParams, void **extra,
                               const void **buf, size_t *len, unsigned char **owned);

struct node_op {
    const char *what;
    int op;
    CUgraph graph;
    CUgraphExec exec;
    CUgraphNode node;
    const CUgraphNode *deps;
    size_t ndeps;
    const CUDA_KERNEL_NODE_PARAMS *p;
};

/* The launch handle of the parameters: the function, else the kernel
 * (CUDA's rule: kern is used only when func is NULL). */
static CUfunction node_function(const CUDA_KERNEL_NODE_PARAMS *p)
{
    return p->func ? p->func : (CUfunction)(void *)p->kern;
}

static CUresult node_call(const struct node_op *o, CUgraphNode *made)
{
    const void *params = NULL;
    size_t len = 0;
    unsigned char *owned = NULL;

    if (!o->p || (o->ndeps && !o->deps) || (o->p->kernelParams && o->p->extra))
        return CUDA_ERROR_INVALID_VALUE;
    const CUDA_KERNEL_NODE_PARAMS *p = o->p;
    if (!node_function(p))
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult rc = rgpu_cuda_pack_params(node_function(p), p->kernelParams, p->extra, &params,
                                        &len, &owned);
    if (rc != CUDA_SUCCESS)
        return rc;
    rgpu_printing_graph_kernel(rgpu_printing_may((uint64_t)(uintptr_t)node_function(p)));
    const dim3 grid = { p->gridDimX, p->gridDimY, p->gridDimZ };
    const dim3 block = { p->blockDimX, p->blockDimY, p->blockDimZ };
    rc = rgpu_cu_graph_kernel_node(o->op, o->graph, o->exec, o->node, o->deps, o->ndeps,
                                   node_function(p), grid, block, p->sharedMemBytes,
                                   p->extra != NULL, made, params, len);
    free(owned);
    return rc;
}

RGPU_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             size_t numDependencies,
                                             const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    struct node_op o = { "cuGraphAddKernelNode", RGPU_GRAPH_NODE_ADD, hGraph, NULL, NULL,
                         dependencies, numDependencies, nodeParams };
    if (!phGraphNode)
        return CUDA_ERROR_INVALID_VALUE;
    return node_call(&o, phGraphNode);
}

RGPU_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                       const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    struct node_op o = { "cuGraphExecKernelNodeSetParams", RGPU_GRAPH_EXEC_SET, NULL,
                         hGraphExec, hNode, NULL, 0, nodeParams };
    return node_call(&o, NULL);
}

RGPU_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    struct node_op o = { "cuGraphKernelNodeSetParams", RGPU_GRAPH_NODE_SET, NULL, NULL, hNode,
                         NULL, 0, nodeParams };
    return node_call(&o, NULL);
}

/* ---- node lists ------------------------------------------------------------------------ */

/* A graph's nodes (which 0) or roots (1), as the runtime's
 * (stubs/cudart_graphs.c): with nodes NULL, the count; else the caller's
 * *count entries filled (NULL past the graph's) and *count the number
 * filled, each node known from now on. */
static CUresult graph_nodes(int which, CUgraph graph, CUgraphNode *nodes, size_t *count)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    return (CUresult)rgpu_graph_nodes_ask(LIB, RGPU_CUDA_rgpu_cu_graph_nodes, graph, which,
                                          (void **)nodes, count);
}

RGPU_EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    return graph_nodes(0, hGraph, nodes, numNodes);
}

RGPU_EXPORT CUresult cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *rootNodes,
                                         size_t *numRootNodes)
{
    return graph_nodes(1, hGraph, rootNodes, numRootNodes);
}

/* The library writes the description on the server, into memory; the
 * text comes back and is written here, to the caller's file. */
RGPU_EXPORT CUresult cuGraphDebugDotPrint(CUgraph hGraph, const char *path, unsigned int flags)
{
    return (CUresult)rgpu_graph_dot_ask(LIB, RGPU_CUDA_rgpu_cu_graph_dot, hGraph, path, flags);
}

/* ---- stream capture ------------------------------------------------------------------------- */

/* As the runtime's (stubs/cudart_cache.c): a capture under way is counted
 * in the core, whose waiting policy and the runtime's capture questions
 * depend on it.  A statically linked runtime captures through these. */
static CUresult counted_begin(const struct rgpu_proc *proc, const void *const *argv)
{
    CUresult rc = (CUresult)rgpu_call(LIB, proc, argv);
    if (rc == CUDA_SUCCESS)
        rgpu_capture_begin();
    return rc;
}

static CUresult counted_end(const struct rgpu_proc *proc, CUstream stream, CUgraph *phGraph)
{
    const void *argv[] = { &stream, &phGraph };
    CUresult rc = (CUresult)rgpu_call(LIB, proc, argv);
    /* Ending fails when the capture was invalidated, but it is over. */
    if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
        rc == CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
        rgpu_capture_end();
    return rc;
}

RGPU_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    const void *argv[] = { &hStream, &mode };
    return counted_begin(RGPU_CUDA_cuStreamBeginCapture_v2, argv);
}

RGPU_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    const void *argv[] = { &hStream, &mode };
    return counted_begin(RGPU_CUDA_cuStreamBeginCapture_v2_ptsz, argv);
}

RGPU_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                                 const CUgraphNode *dependencies,
                                                 const CUgraphEdgeData *dependencyData,
                                                 size_t numDependencies, CUstreamCaptureMode mode)
{
    const void *argv[] = { &hStream, &hGraph, &dependencies, &dependencyData, &numDependencies,
                           &mode };
    return counted_begin(RGPU_CUDA_cuStreamBeginCaptureToGraph, argv);
}

RGPU_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                      const CUgraphNode *dependencies,
                                                      const CUgraphEdgeData *dependencyData,
                                                      size_t numDependencies,
                                                      CUstreamCaptureMode mode)
{
    const void *argv[] = { &hStream, &hGraph, &dependencies, &dependencyData, &numDependencies,
                           &mode };
    return counted_begin(RGPU_CUDA_cuStreamBeginCaptureToGraph_ptsz, argv);
}

RGPU_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return counted_end(RGPU_CUDA_cuStreamEndCapture, hStream, phGraph);
}

RGPU_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return counted_end(RGPU_CUDA_cuStreamEndCapture_ptsz, hStream, phGraph);
}

/* The capture's state with its dependency arrays, as the runtime's
 * (stubs/cudart_hand.c): the nodes and edges come back in the reply into
 * arrays kept on the client per stream (common/rgpu_capture_arrays.c). */
struct capture_query {
    CUstream stream;
    int per_thread;
    CUstreamCaptureStatus *status;
    cuuint64_t *id;
    CUgraph *graph;
};

static int ask_capture_info(void *ctx, void *nodes, void *edges, size_t room, size_t *count)
{
    const struct capture_query *q = ctx;
    return rgpu_cu_capture_info(q->stream, q->per_thread, q->status, q->id, q->graph,
                                (CUgraphNode *)nodes, (CUgraphEdgeData *)edges, room, count);
}

static CUresult capture_info(int per_thread, CUstream stream, CUstreamCaptureStatus *status,
                             cuuint64_t *id, CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *count)
{
    struct capture_query q = { stream, per_thread, status, id, graph };
    void *nodes = NULL, *edge_data = NULL;
    size_t n = 0;
    int rc = rgpu_capture_query_arrays((uint64_t)(uintptr_t)stream, per_thread,
                                       sizeof(CUgraphNode), sizeof(CUgraphEdgeData),
                                       deps != NULL, edges != NULL, ask_capture_info, &q, &nodes,
                                       &edge_data, &n);
    if (rc < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (rc != CUDA_SUCCESS)
        return (CUresult)rc;
    if (deps)
        *deps = n ? (const CUgraphNode *)nodes : NULL;
    if (edges)
        *edges = n ? (const CUgraphEdgeData *)edge_data : NULL;
    if (count)
        *count = n;
    return CUDA_SUCCESS;
}

RGPU_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream hStream,
                                               CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               const CUgraphEdgeData **edgeData_out,
                                               size_t *numDependencies_out)
{
    return capture_info(0, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

RGPU_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                                    CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out,
                                                    const CUgraphEdgeData **edgeData_out,
                                                    size_t *numDependencies_out)
{
    return capture_info(1, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

/* _v2 is _v3 without edge data. */
RGPU_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream hStream,
                                               CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               size_t *numDependencies_out)
{
    return capture_info(0, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        NULL, numDependencies_out);
}

RGPU_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                                    CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out,
                                                    size_t *numDependencies_out)
{
    return capture_info(1, hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        NULL, numDependencies_out);
}

/* ---- memory-allocation nodes --------------------------------------------------------------- */

/* As the runtime's (stubs/graph_lists.h): the record as its parts, the
 * address back, recorded as device memory. */
RGPU_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                            const CUgraphNode *dependencies,
                                            size_t numDependencies,
                                            CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    uint64_t dptr = 0;
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    const struct rgpu_graph_alloc a = { hGraph, (void *const *)dependencies, numDependencies,
                                        &nodeParams->poolProps, nodeParams->accessDescs,
                                        nodeParams->accessDescCount, nodeParams->bytesize };
    CUresult rc = (CUresult)rgpu_graph_mem_alloc_ask(LIB, RGPU_CUDA_rgpu_cu_graph_mem_alloc, &a,
                                                     (void **)phGraphNode, &dptr);
    if (rc == CUDA_SUCCESS)
        nodeParams->dptr = (CUdeviceptr)dptr;
    return rc;
}

/* ---- edge lists ------------------------------------------------------------------------------ */

RGPU_EXPORT CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                        CUgraphEdgeData *edgeData, size_t *numEdges)
{
    _Static_assert(sizeof *edgeData == sizeof(uint64_t), "8-byte edge records");
    return (CUresult)rgpu_graph_edges_ask(LIB, RGPU_CUDA_rgpu_cu_graph_edges, hGraph,
                                          (void **)from, (void **)to,
                                          (uint64_t *)(void *)edgeData, numEdges);
}

/* ---- a kernel node's parameters, queried --------------------------------------------------- */

/* The function the node launches (a handle this process holds), its shape
 * and its arguments as pointers into a copy kept for the caller
 * (stubs/graph_params.h). */
RGPU_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
                                                   CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    uint64_t function = 0, kernel = 0, ctx = 0;
    dim3 grid, block;
    unsigned int shmem = 0;
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    struct rgpu_node_args *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = rgpu_cu_graph_kernel_params(hNode, &function, &kernel, &ctx, &grid, &block,
                                              &shmem, a->offsets, a->sizes,
                                              RGPU_GRAPH_PARAMS_MAX, &a->nparams, a->bytes,
                                              RGPU_GRAPH_PARAM_BYTES_MAX, &a->nbytes);
    void **args = rc == CUDA_SUCCESS ? rgpu_keep_node_args((uint64_t)(uintptr_t)hNode, a) : NULL;
    if (rc == CUDA_SUCCESS && !args)
        rc = (CUresult)rgpu_transport_status(LIB, "cuGraphKernelNodeGetParams", RGPU_EPROTO);
    if (rc == CUDA_SUCCESS) {
        memset(nodeParams, 0, sizeof *nodeParams);
        nodeParams->func = (CUfunction)(uintptr_t)function;
        nodeParams->gridDimX = grid.x;
        nodeParams->gridDimY = grid.y;
        nodeParams->gridDimZ = grid.z;
        nodeParams->blockDimX = block.x;
        nodeParams->blockDimY = block.y;
        nodeParams->blockDimZ = block.z;
        nodeParams->sharedMemBytes = shmem;
        nodeParams->kernelParams = args;
        nodeParams->kern = (CUkernel)(uintptr_t)kernel;
        nodeParams->ctx = (CUcontext)(uintptr_t)ctx;
    }
    free(a);
    return rc;
}

/* CUDA graphs built node by node through the runtime: what the generator
 * cannot describe, through rgpu's own graph procedures
 * (codegen/cudart_own.h, "graphs").  Kernel nodes carry their arguments
 * packed by the kernel's layout, as launches do (one procedure adds a
 * node, sets a node's parameters, or sets them in an executable graph),
 * and come back packed when queried; node and edge lists, the dot
 * description and memory-allocation nodes go as the driver's do, through
 * the client side both share (stubs/graph_lists.h; memcpy and host nodes:
 * stubs/cudart_graph_host.c); a capture into an existing graph is counted
 * as captures are.  Server side: daemon/hand_graphs.c; the rest of the
 * graph calls are generated (codegen/cudart.ann). */
#include "rgpu_client.h"
#include "graph_lists.h"
#include "graph_params.h"
#include "cudart_own.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cudart_lib)
#define RESULT(e) rgpu_runtime_result(e)

int rgpu_cudart_kernel_pack(const void *func, void **args, uint64_t *handle,
                            unsigned char **buf, size_t *len);

/* One kernel-node request: which operation on which handles. */
struct node_op {
    const char *what;
    int op;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaGraphNode_t node;
    const cudaGraphNode_t *deps;
    size_t ndeps;
    const struct cudaKernelNodeParams *p;
};

static int refuse_extra(const char *what)
{
    static int logged;
    return rgpu_refused(LIB, what, "kernel arguments in the `extra` format: not remoted for "
                        "runtime graph nodes (use kernelParams)", &logged);
}

/* The operation, its arguments packed by the kernel's layout. */
static cudaError_t node_call(const struct node_op *o, cudaGraphNode_t *made)
{
    unsigned char *params = NULL;
    size_t len = 0;
    uint64_t kernel = 0;

    if (!o->p || (o->ndeps && !o->deps))
        return RESULT(cudaErrorInvalidValue);
    if (o->p->extra)
        return refuse_extra(o->what);
    int rc = rgpu_cudart_kernel_pack(o->p->func, o->p->kernelParams, &kernel, &params, &len);
    if (rc != cudaSuccess)
        return rc;
    rc = rgpu_graph_kernel_node(o->op, o->graph, o->exec, o->node, o->deps, o->ndeps,
                                (cudaKernel_t)(uintptr_t)kernel, o->p->gridDim,
                                o->p->blockDim, o->p->sharedMemBytes, made, params, len);
    free(params);
    return rc;
}

RGPU_EXPORT cudaError_t cudaGraphAddKernelNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                               const cudaGraphNode_t *pDependencies,
                                               size_t numDependencies,
                                               const struct cudaKernelNodeParams *pNodeParams)
{
    struct node_op o = { "cudaGraphAddKernelNode", RGPU_GRAPH_NODE_ADD, graph, NULL, NULL,
                         pDependencies, numDependencies, pNodeParams };
    if (!pGraphNode)
        return RESULT(cudaErrorInvalidValue);
    return node_call(&o, pGraphNode);
}

RGPU_EXPORT cudaError_t cudaGraphKernelNodeSetParams(cudaGraphNode_t node,
                                                     const struct cudaKernelNodeParams *pNodeParams)
{
    struct node_op o = { "cudaGraphKernelNodeSetParams", RGPU_GRAPH_NODE_SET, NULL, NULL, node,
                         NULL, 0, pNodeParams };
    return node_call(&o, NULL);
}

RGPU_EXPORT cudaError_t cudaGraphExecKernelNodeSetParams(
    cudaGraphExec_t hGraphExec, cudaGraphNode_t node,
    const struct cudaKernelNodeParams *pNodeParams)
{
    struct node_op o = { "cudaGraphExecKernelNodeSetParams", RGPU_GRAPH_EXEC_SET, NULL,
                         hGraphExec, node, NULL, 0, pNodeParams };
    return node_call(&o, NULL);
}

/* ---- the dot description ------------------------------------------------------------ */

/* The library writes the description on the server, into memory; the
 * text comes back and is written here, to the caller's file. */
RGPU_EXPORT cudaError_t cudaGraphDebugDotPrint(cudaGraph_t graph, const char *path,
                                               unsigned int flags)
{
    return rgpu_graph_dot_ask(LIB, RGPU_CUDART_rgpu_graph_dot, graph, path, flags);
}

/* ---- capture into an existing graph ------------------------------------------------------ */

/* As cudaStreamBeginCapture (stubs/cudart_cache.c): a capture under way is
 * counted here, so that the capture questions are asked only while one is;
 * cudaStreamEndCapture ends it and answers the graph captured into. */
static cudaError_t begin_capture_to_graph(const struct rgpu_proc *proc, cudaStream_t stream,
                                          cudaGraph_t graph, const cudaGraphNode_t *deps,
                                          const cudaGraphEdgeData *data, size_t n,
                                          enum cudaStreamCaptureMode mode)
{
    const void *argv[] = { &stream, &graph, &deps, &data, &n, &mode };
    int rc = rgpu_call(LIB, proc, argv);
    if (rc == cudaSuccess)
        rgpu_capture_begin();
    return rc;
}

#undef cudaStreamBeginCaptureToGraph
RGPU_EXPORT cudaError_t cudaStreamBeginCaptureToGraph(cudaStream_t stream, cudaGraph_t graph,
                                                      const cudaGraphNode_t *dependencies,
                                                      const cudaGraphEdgeData *dependencyData,
                                                      size_t numDependencies,
                                                      enum cudaStreamCaptureMode mode)
{
    return begin_capture_to_graph(RGPU_CUDART_cudaStreamBeginCaptureToGraph, stream, graph,
                                  dependencies, dependencyData, numDependencies, mode);
}

RGPU_EXPORT cudaError_t cudaStreamBeginCaptureToGraph_ptsz(
    cudaStream_t stream, cudaGraph_t graph, const cudaGraphNode_t *dependencies,
    const cudaGraphEdgeData *dependencyData, size_t numDependencies,
    enum cudaStreamCaptureMode mode)
{
    return begin_capture_to_graph(RGPU_CUDART_cudaStreamBeginCaptureToGraph_ptsz, stream, graph,
                                  dependencies, dependencyData, numDependencies, mode);
}

/* ---- node lists ------------------------------------------------------------------------ */

/* A graph's nodes (which 0) or roots (1), CUDA's way: with nodes NULL,
 * *count becomes how many there are; else the caller's *count entries are
 * filled, those past the graph's NULL, and *count becomes the number
 * filled.  The handles are the session's from now on (the server adds
 * them), and known here. */
int rgpu_cudart_graph_nodes(int which, cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count);
int rgpu_cudart_graph_nodes(int which, cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *count)
{
    if (!count)
        return RESULT(cudaErrorInvalidValue);
    return rgpu_graph_nodes_ask(LIB, RGPU_CUDART_rgpu_graph_nodes, graph, which, (void **)nodes,
                                count);
}

RGPU_EXPORT cudaError_t cudaGraphGetRootNodes(cudaGraph_t graph, cudaGraphNode_t *pRootNodes,
                                              size_t *pNumRootNodes)
{
    return rgpu_cudart_graph_nodes(1, graph, pRootNodes, pNumRootNodes);
}

/* ---- memory-allocation nodes ---------------------------------------------------------- */

/* The record travels as its parts, the address comes back
 * (stubs/graph_lists.h). */
RGPU_EXPORT cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                 const cudaGraphNode_t *pDependencies,
                                                 size_t numDependencies,
                                                 struct cudaMemAllocNodeParams *nodeParams)
{
    uint64_t dptr = 0;
    if (!nodeParams)
        return RESULT(cudaErrorInvalidValue);
    const struct rgpu_graph_alloc a = { graph, (void *const *)pDependencies, numDependencies,
                                        &nodeParams->poolProps, nodeParams->accessDescs,
                                        nodeParams->accessDescCount, nodeParams->bytesize };
    int rc = rgpu_graph_mem_alloc_ask(LIB, RGPU_CUDART_rgpu_graph_mem_alloc, &a,
                                      (void **)pGraphNode, &dptr);
    if (rc == cudaSuccess)
        nodeParams->dptr = (void *)(uintptr_t)dptr;
    return rc;
}

/* ---- edge lists ------------------------------------------------------------------------- */

RGPU_EXPORT cudaError_t cudaGraphGetEdges(cudaGraph_t graph, cudaGraphNode_t *from,
                                          cudaGraphNode_t *to, cudaGraphEdgeData *edgeData,
                                          size_t *numEdges)
{
    _Static_assert(sizeof *edgeData == sizeof(uint64_t), "8-byte edge records");
    return rgpu_graph_edges_ask(LIB, RGPU_CUDART_rgpu_graph_edges, graph, (void **)from,
                                (void **)to, (uint64_t *)(void *)edgeData, numEdges);
}

/* ---- a kernel node's parameters, queried ------------------------------------------------ */

const void *rgpu_cudart_host_fn(uint64_t h);

/* The kernel comes back as the host stub nvcc registered (what programs
 * compare with their kernels); a kernel this process never registered is
 * the runtime's invalid device function, as natively. */
RGPU_EXPORT cudaError_t cudaGraphKernelNodeGetParams(cudaGraphNode_t node,
                                                     struct cudaKernelNodeParams *pNodeParams)
{
    uint64_t kernel = 0;
    dim3 grid, block;
    unsigned int shmem = 0;
    if (!pNodeParams)
        return RESULT(cudaErrorInvalidValue);
    struct rgpu_node_args *a = calloc(1, sizeof *a);
    if (!a)
        return RESULT(cudaErrorMemoryAllocation);
    int rc = rgpu_graph_kernel_params(node, &kernel, &grid, &block, &shmem, a->offsets, a->sizes,
                                      RGPU_GRAPH_PARAMS_MAX, &a->nparams, a->bytes,
                                      RGPU_GRAPH_PARAM_BYTES_MAX, &a->nbytes);
    const void *fn = rc == cudaSuccess ? rgpu_cudart_host_fn(kernel) : NULL;
    if (rc == cudaSuccess && !fn)
        rc = RESULT(cudaErrorInvalidDeviceFunction);
    void **args = rc == cudaSuccess ? rgpu_keep_node_args((uint64_t)(uintptr_t)node, a) : NULL;
    if (rc == cudaSuccess && !args)
        rc = rgpu_transport_status(LIB, "cudaGraphKernelNodeGetParams", RGPU_EPROTO);
    if (rc == cudaSuccess) {
        memset(pNodeParams, 0, sizeof *pNodeParams);
        pNodeParams->func = (void *)fn;
        pNodeParams->gridDim = grid;
        pNodeParams->blockDim = block;
        pNodeParams->sharedMemBytes = shmem;
        pNodeParams->kernelParams = args;
    }
    free(a);
    return rc;
}

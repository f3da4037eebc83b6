/* Graph node records through the runtime: cudaGraphAddNode,
 * cudaGraphNodeSetParams, cudaGraphExecNodeSetParams, and conditional
 * nodes and their handles.  As the driver's (stubs/cuda_graph_records.c):
 * a record of a type rgpu serves goes to the call of that type, edges with
 * data are added after the node, conditional nodes are rgpu_graph_cond_node
 * (stubs/graph_conditionals.h). */
#include "rgpu_client.h"
#include "graph_conditionals.h"
#include "cudart_own.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cudart_lib)

static cudaError_t refuse(const char *what, const char *reason)
{
    static int logged;
    return (cudaError_t)rgpu_refused(LIB, what, reason, &logged);
}

static int edges_default(const cudaGraphEdgeData *data, size_t n)
{
    static const cudaGraphEdgeData plain;
    for (size_t i = 0; data && i < n; i++)
        if (memcmp(&data[i], &plain, sizeof plain) != 0)
            return 0;
    return 1;
}

static struct cudaKernelNodeParams kernel_v1(const struct cudaKernelNodeParamsV2 *k)
{
    struct cudaKernelNodeParams p = { k->func, k->gridDim, k->blockDim, k->sharedMemBytes,
                                      k->kernelParams, k->extra };
    return p;
}

static struct cudaMemsetParams memset_v1(const struct cudaMemsetParamsV2 *m)
{
    struct cudaMemsetParams p = { m->dst, m->pitch, m->value, m->elementSize, m->width,
                                  m->height };
    return p;
}

static cudaError_t add_mem_alloc(cudaGraphNode_t *made, cudaGraph_t graph,
                                 const cudaGraphNode_t *deps, size_t n,
                                 struct cudaMemAllocNodeParamsV2 *p)
{
    struct cudaMemAllocNodeParams a = { p->poolProps, p->accessDescs, p->accessDescCount,
                                        p->bytesize, NULL };
    cudaError_t rc = cudaGraphAddMemAllocNode(made, graph, deps, n, &a);
    if (rc == cudaSuccess)
        p->dptr = a.dptr;
    return rc;
}

static cudaError_t add_conditional(cudaGraphNode_t *made, cudaGraph_t graph,
                                   const cudaGraphNode_t *deps, size_t n,
                                   struct cudaConditionalNodeParams *p)
{
    struct rgpu_cond_node c = { graph, deps, n, p->handle, (unsigned)p->type, p->size, NULL };
    void **bodies = NULL;
    int rc = rgpu_cond_node_add(LIB, RGPU_CUDART_rgpu_graph_cond_node, &c, (void **)made,
                                &bodies);
    if (rc == 0)
        p->phGraph_out = (cudaGraph_t *)bodies;     /* the same size: handles are 64-bit */
    return (cudaError_t)rc;
}

static cudaError_t add_by_type(cudaGraphNode_t *made, cudaGraph_t graph,
                               const cudaGraphNode_t *deps, size_t n,
                               struct cudaGraphNodeParams *p)
{
    switch (p->type) {
    case cudaGraphNodeTypeKernel: {
        struct cudaKernelNodeParams k = kernel_v1(&p->kernel);
        return cudaGraphAddKernelNode(made, graph, deps, n, &k);
    }
    case cudaGraphNodeTypeMemcpy:
        return cudaGraphAddMemcpyNode(made, graph, deps, n, &p->memcpy.copyParams);
    case cudaGraphNodeTypeMemset: {
        struct cudaMemsetParams m = memset_v1(&p->memset);
        return cudaGraphAddMemsetNode(made, graph, deps, n, &m);
    }
    case cudaGraphNodeTypeEmpty:
        return cudaGraphAddEmptyNode(made, graph, deps, n);
    case cudaGraphNodeTypeWaitEvent:
        return cudaGraphAddEventWaitNode(made, graph, deps, n, p->eventWait.event);
    case cudaGraphNodeTypeEventRecord:
        return cudaGraphAddEventRecordNode(made, graph, deps, n, p->eventRecord.event);
    case cudaGraphNodeTypeGraph:
        if (p->graph.ownership != cudaGraphChildGraphOwnershipClone)
            return refuse("cudaGraphAddNode", "a child graph moved into its node (ownership "
                                              "move): not remoted yet; the default clone is");
        return cudaGraphAddChildGraphNode(made, graph, deps, n, p->graph.graph);
    case cudaGraphNodeTypeMemAlloc:
        return add_mem_alloc(made, graph, deps, n, &p->alloc);
    case cudaGraphNodeTypeMemFree:
        return cudaGraphAddMemFreeNode(made, graph, deps, n, p->free.dptr);
    case cudaGraphNodeTypeConditional:
        return add_conditional(made, graph, deps, n, &p->conditional);
    case cudaGraphNodeTypeHost:
        return cudaGraphAddHostNode(made, graph, deps, n,
                                    &(struct cudaHostNodeParams){ p->host.fn, p->host.userData });
    default:
        return refuse("cudaGraphAddNode", "external semaphore nodes: not remoted");
    }
}

static int record_valid(const struct cudaGraphNodeParams *p)
{
    return p && !p->reserved0[0] && !p->reserved0[1] && !p->reserved0[2] && !p->reserved2;
}

RGPU_EXPORT cudaError_t cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                         const cudaGraphNode_t *pDependencies,
                                         const cudaGraphEdgeData *dependencyData,
                                         size_t numDependencies,
                                         struct cudaGraphNodeParams *nodeParams)
{
    if (!pGraphNode || !record_valid(nodeParams) || (numDependencies && !pDependencies))
        return cudaErrorInvalidValue;
    if (edges_default(dependencyData, numDependencies))
        return add_by_type(pGraphNode, graph, pDependencies, numDependencies, nodeParams);
    cudaGraphNode_t *to = malloc(numDependencies * sizeof *to);
    if (!to)
        return cudaErrorMemoryAllocation;
    cudaError_t rc = add_by_type(pGraphNode, graph, NULL, 0, nodeParams);
    for (size_t i = 0; rc == cudaSuccess && i < numDependencies; i++)
        to[i] = *pGraphNode;
    if (rc == cudaSuccess)
        rc = cudaGraphAddDependencies(graph, pDependencies, to, dependencyData, numDependencies);
    if (rc != cudaSuccess && to[0]) {
        cudaGraphDestroyNode(to[0]);    /* the node without its edges is not the caller's */
        *pGraphNode = NULL;
    }
    free(to);
    return rc;
}

static cudaError_t set_by_type(cudaGraphExec_t exec, cudaGraphNode_t node,
                               struct cudaGraphNodeParams *p, const char *what)
{
    switch (p->type) {
    case cudaGraphNodeTypeKernel: {
        struct cudaKernelNodeParams k = kernel_v1(&p->kernel);
        return exec ? cudaGraphExecKernelNodeSetParams(exec, node, &k)
                    : cudaGraphKernelNodeSetParams(node, &k);
    }
    case cudaGraphNodeTypeMemcpy:
        return exec ? cudaGraphExecMemcpyNodeSetParams(exec, node, &p->memcpy.copyParams)
                    : cudaGraphMemcpyNodeSetParams(node, &p->memcpy.copyParams);
    case cudaGraphNodeTypeMemset: {
        struct cudaMemsetParams m = memset_v1(&p->memset);
        return exec ? cudaGraphExecMemsetNodeSetParams(exec, node, &m)
                    : cudaGraphMemsetNodeSetParams(node, &m);
    }
    case cudaGraphNodeTypeWaitEvent:
        return exec ? cudaGraphExecEventWaitNodeSetEvent(exec, node, p->eventWait.event)
                    : cudaGraphEventWaitNodeSetEvent(node, p->eventWait.event);
    case cudaGraphNodeTypeEventRecord:
        return exec ? cudaGraphExecEventRecordNodeSetEvent(exec, node, p->eventRecord.event)
                    : cudaGraphEventRecordNodeSetEvent(node, p->eventRecord.event);
    case cudaGraphNodeTypeGraph:
        if (exec)
            return cudaGraphExecChildGraphNodeSetParams(exec, node, p->graph.graph);
        break;
    case cudaGraphNodeTypeHost: {
        struct cudaHostNodeParams h = { p->host.fn, p->host.userData };
        return exec ? cudaGraphExecHostNodeSetParams(exec, node, &h)
                    : cudaGraphHostNodeSetParams(node, &h);
    }
    default:
        break;
    }
    return refuse(what, "new parameters for this node type (conditional, child graph outside an "
                        "executable graph, memory, external semaphore) through a node record: "
                        "not remoted yet");
}

RGPU_EXPORT cudaError_t cudaGraphNodeSetParams(cudaGraphNode_t node,
                                               struct cudaGraphNodeParams *nodeParams)
{
    if (!record_valid(nodeParams))
        return cudaErrorInvalidValue;
    return set_by_type(NULL, node, nodeParams, "cudaGraphNodeSetParams");
}

RGPU_EXPORT cudaError_t cudaGraphExecNodeSetParams(cudaGraphExec_t graphExec,
                                                   cudaGraphNode_t node,
                                                   struct cudaGraphNodeParams *nodeParams)
{
    if (!record_valid(nodeParams))
        return cudaErrorInvalidValue;
    if (!graphExec)
        return cudaErrorInvalidResourceHandle;
    return set_by_type(graphExec, node, nodeParams, "cudaGraphExecNodeSetParams");
}

RGPU_EXPORT cudaError_t cudaGraphConditionalHandleCreate(cudaGraphConditionalHandle *pHandle_out,
                                                         cudaGraph_t graph,
                                                         unsigned int defaultLaunchValue,
                                                         unsigned int flags)
{
    if (!pHandle_out)
        return cudaErrorInvalidValue;
    return rgpu_graph_cond_handle(pHandle_out, graph, defaultLaunchValue, flags);
}

#if CUDART_VERSION >= 13010
/* CUDA 13.1's form names an execution context: without one (NULL) it is
 * the form above, in the current context, which the server's runtime of
 * any CUDA 13 has; execution contexts are not remoted. */
RGPU_EXPORT cudaError_t cudaGraphConditionalHandleCreate_v2(
    cudaGraphConditionalHandle *pHandle_out, cudaGraph_t graph, cudaExecutionContext_t ctx,
    unsigned int defaultLaunchValue, unsigned int flags)
{
    static int logged;
    if (ctx)
        return (cudaError_t)rgpu_refused(LIB, "cudaGraphConditionalHandleCreate_v2",
                                         "with an execution context: execution contexts are "
                                         "not remoted yet (NULL, the current context, is "
                                         "served)", &logged);
    return cudaGraphConditionalHandleCreate(pHandle_out, graph, defaultLaunchValue, flags);
}
#endif

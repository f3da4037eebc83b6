/* Graph node records through the driver: cuGraphAddNode (and its _v2 with
 * edge data), cuGraphNodeSetParams, cuGraphExecNodeSetParams; conditional
 * nodes and their handles; and the CUDA 11 kernel-node record
 * (CUDA_KERNEL_NODE_PARAMS_v1) of the unversioned cuGraphAddKernelNode and
 * its setters, which programs built against older headers still call.
 *
 * A record of a type rgpu serves by a call of its own is handed to that
 * call, so that each node type is checked and marshalled in one place
 * (stubs/cuda_graphs.c, the generated calls).  Dependencies that carry edge
 * data other than the default are added after the node, by
 * cuGraphAddDependencies_v2: the driver builds the same graph either way.
 * Conditional nodes go through rgpu_cu_graph_cond_node
 * (daemon/hand_graph_conditionals.c). */
#include "rgpu_client.h"
#include "graph_conditionals.h"
#include "cuda_own.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v3) == sizeof(CUDA_KERNEL_NODE_PARAMS_v2),
               "the record's kernel parameters are the _v2 call's");

static CUresult refuse(const char *what, const char *reason)
{
    static int logged;
    return (CUresult)rgpu_refused(LIB, what, reason, &logged);
}

static int edges_default(const CUgraphEdgeData *data, size_t n)
{
    static const CUgraphEdgeData plain;
    for (size_t i = 0; data && i < n; i++)
        if (memcmp(&data[i], &plain, sizeof plain) != 0)
            return 0;
    return 1;
}

static CUDA_MEMSET_NODE_PARAMS memset_v1(const CUDA_MEMSET_NODE_PARAMS_v2 *m)
{
    CUDA_MEMSET_NODE_PARAMS p = { m->dst, m->pitch, m->value, m->elementSize, m->width,
                                  m->height };
    return p;
}

static CUresult add_mem_alloc(CUgraphNode *made, CUgraph graph, const CUgraphNode *deps,
                              size_t n, CUDA_MEM_ALLOC_NODE_PARAMS_v2 *p)
{
    CUDA_MEM_ALLOC_NODE_PARAMS a = { p->poolProps, p->accessDescs, p->accessDescCount,
                                     p->bytesize, 0 };
    CUresult rc = cuGraphAddMemAllocNode(made, graph, deps, n, &a);
    if (rc == CUDA_SUCCESS)
        p->dptr = a.dptr;
    return rc;
}

static CUresult add_conditional(CUgraphNode *made, CUgraph graph, const CUgraphNode *deps,
                                size_t n, CUDA_CONDITIONAL_NODE_PARAMS *p)
{
    struct rgpu_cond_node c = { graph, deps, n, p->handle, (unsigned)p->type, p->size, p->ctx };
    void **bodies = NULL;
    int rc = rgpu_cond_node_add(LIB, RGPU_CUDA_rgpu_cu_graph_cond_node, &c, (void **)made,
                                &bodies);
    if (rc == 0)
        p->phGraph_out = (CUgraph *)bodies;     /* the same size: handles are 64-bit */
    return (CUresult)rc;
}

/* A record whose node type rgpu serves, to the call that adds that type. */
static CUresult add_by_type(CUgraphNode *made, CUgraph graph, const CUgraphNode *deps,
                            size_t n, CUgraphNodeParams *p)
{
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS k;
        memcpy(&k, &p->kernel, sizeof k);
        return cuGraphAddKernelNode_v2(made, graph, deps, n, &k);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return cuGraphAddMemcpyNode(made, graph, deps, n, &p->memcpy.copyParams,
                                    p->memcpy.copyCtx);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m = memset_v1(&p->memset);
        return cuGraphAddMemsetNode(made, graph, deps, n, &m, p->memset.ctx);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return cuGraphAddEmptyNode(made, graph, deps, n);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return cuGraphAddEventWaitNode(made, graph, deps, n, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return cuGraphAddEventRecordNode(made, graph, deps, n, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_GRAPH:
        if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE)
            return refuse("cuGraphAddNode", "a child graph moved into its node (ownership "
                                            "MOVE): not remoted yet; the default CLONE is");
        return cuGraphAddChildGraphNode(made, graph, deps, n, p->graph.graph);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        return add_mem_alloc(made, graph, deps, n, &p->alloc);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return cuGraphAddMemFreeNode(made, graph, deps, n, p->free.dptr);
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
        return add_conditional(made, graph, deps, n, &p->conditional);
    case CU_GRAPH_NODE_TYPE_HOST:
        return cuGraphAddHostNode(made, graph, deps, n,
                                  &(CUDA_HOST_NODE_PARAMS){ p->host.fn, p->host.userData });
    default:
        return refuse("cuGraphAddNode", "external semaphore and batch memory-operation nodes: "
                                        "not remoted");
    }
}

static int record_valid(const CUgraphNodeParams *p)
{
    return p && !p->reserved0[0] && !p->reserved0[1] && !p->reserved0[2] && !p->reserved2;
}

RGPU_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies,
                                       const CUgraphEdgeData *dependencyData,
                                       size_t numDependencies, CUgraphNodeParams *nodeParams)
{
    if (!phGraphNode || !record_valid(nodeParams) || (numDependencies && !dependencies))
        return CUDA_ERROR_INVALID_VALUE;
    if (edges_default(dependencyData, numDependencies))
        return add_by_type(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
    CUgraphNode *to = malloc(numDependencies * sizeof *to);
    if (!to)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult rc = add_by_type(phGraphNode, hGraph, NULL, 0, nodeParams);
    for (size_t i = 0; rc == CUDA_SUCCESS && i < numDependencies; i++)
        to[i] = *phGraphNode;
    if (rc == CUDA_SUCCESS)
        rc = cuGraphAddDependencies_v2(hGraph, dependencies, to, dependencyData,
                                       numDependencies);
    if (rc != CUDA_SUCCESS && to[0]) {
        cuGraphDestroyNode(to[0]);      /* the node without its edges is not the caller's */
        *phGraphNode = NULL;
    }
    free(to);
    return rc;
}

/* The CUDA 12.2 form: no edge data. */
#undef cuGraphAddNode
RGPU_EXPORT CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                    const CUgraphNode *dependencies, size_t numDependencies,
                                    CUgraphNodeParams *nodeParams)
{
    return cuGraphAddNode_v2(phGraphNode, hGraph, dependencies, NULL, numDependencies,
                             nodeParams);
}

/* A node of graph (exec NULL) or of an executable graph given new
 * parameters, by the call of its type. */
static CUresult set_by_type(CUgraphExec exec, CUgraphNode node, CUgraphNodeParams *p,
                            const char *what)
{
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS k;
        memcpy(&k, &p->kernel, sizeof k);
        return exec ? cuGraphExecKernelNodeSetParams_v2(exec, node, &k)
                    : cuGraphKernelNodeSetParams_v2(node, &k);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return exec ? cuGraphExecMemcpyNodeSetParams(exec, node, &p->memcpy.copyParams,
                                                     p->memcpy.copyCtx)
                    : cuGraphMemcpyNodeSetParams(node, &p->memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS m = memset_v1(&p->memset);
        return exec ? cuGraphExecMemsetNodeSetParams(exec, node, &m, p->memset.ctx)
                    : cuGraphMemsetNodeSetParams(node, &m);
    }
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return exec ? cuGraphExecEventWaitNodeSetEvent(exec, node, p->eventWait.event)
                    : cuGraphEventWaitNodeSetEvent(node, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return exec ? cuGraphExecEventRecordNodeSetEvent(exec, node, p->eventRecord.event)
                    : cuGraphEventRecordNodeSetEvent(node, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_GRAPH:
        if (exec)
            return cuGraphExecChildGraphNodeSetParams(exec, node, p->graph.graph);
        break;
    case CU_GRAPH_NODE_TYPE_HOST: {
        CUDA_HOST_NODE_PARAMS h = { p->host.fn, p->host.userData };
        return exec ? cuGraphExecHostNodeSetParams(exec, node, &h)
                    : cuGraphHostNodeSetParams(node, &h);
    }
    default:
        break;
    }
    return refuse(what, "new parameters for this node type (conditional, child graph outside an "
                        "executable graph, memory, external semaphore, batch memory operation) "
                        "through a node record: not remoted yet");
}

RGPU_EXPORT CUresult cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams)
{
    if (!record_valid(nodeParams))
        return CUDA_ERROR_INVALID_VALUE;
    return set_by_type(NULL, hNode, nodeParams, "cuGraphNodeSetParams");
}

RGPU_EXPORT CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                              CUgraphNodeParams *nodeParams)
{
    if (!record_valid(nodeParams))
        return CUDA_ERROR_INVALID_VALUE;
    if (!hGraphExec)
        return CUDA_ERROR_INVALID_HANDLE;
    return set_by_type(hGraphExec, hNode, nodeParams, "cuGraphExecNodeSetParams");
}

RGPU_EXPORT CUresult cuGraphConditionalHandleCreate(CUgraphConditionalHandle *pHandle_out,
                                                    CUgraph hGraph, CUcontext ctx,
                                                    unsigned int defaultLaunchValue,
                                                    unsigned int flags)
{
    if (!pHandle_out)
        return CUDA_ERROR_INVALID_VALUE;
    return rgpu_cu_graph_cond_handle(pHandle_out, hGraph, ctx, defaultLaunchValue, flags);
}

/* ---- the CUDA 11 kernel-node record ------------------------------------------------- */

static CUDA_KERNEL_NODE_PARAMS kernel_v2(const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUDA_KERNEL_NODE_PARAMS k = { p->func, p->gridDimX, p->gridDimY, p->gridDimZ,
                                  p->blockDimX, p->blockDimY, p->blockDimZ,
                                  p->sharedMemBytes, p->kernelParams, p->extra, NULL, NULL };
    return k;
}

#undef cuGraphAddKernelNode
RGPU_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          size_t numDependencies,
                                          const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS k = kernel_v2(nodeParams);
    return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &k);
}

#undef cuGraphKernelNodeSetParams
RGPU_EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode,
                                                const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS k = kernel_v2(nodeParams);
    return cuGraphKernelNodeSetParams_v2(hNode, &k);
}

#undef cuGraphExecKernelNodeSetParams
RGPU_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS k = kernel_v2(nodeParams);
    return cuGraphExecKernelNodeSetParams_v2(hGraphExec, hNode, &k);
}

#undef cuGraphKernelNodeGetParams
RGPU_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode,
                                                CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    CUDA_KERNEL_NODE_PARAMS k;
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = cuGraphKernelNodeGetParams_v2(hNode, &k);
    if (rc == CUDA_SUCCESS) {
        /* The v1 record has no kernel field: a node made from a CUkernel
         * is named by that handle, which rgpu's calls take as a function. */
        *nodeParams = (CUDA_KERNEL_NODE_PARAMS_v1){ k.func ? k.func : (CUfunction)(void *)k.kern,
                                                    k.gridDimX, k.gridDimY, k.gridDimZ,
                                                    k.blockDimX, k.blockDimY, k.blockDimZ,
                                                    k.sharedMemBytes, k.kernelParams, k.extra };
    }
    return rc;
}

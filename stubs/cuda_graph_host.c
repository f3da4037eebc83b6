/* Graph host nodes, graph copies to or from host memory and graph launches
 * through the driver, as the runtime's (stubs/cudart_graph_host.c): the
 * program's function and memory stay here, the server's graph names them
 * by tokens (common/rgpu_graph_host.c, daemon/graph_host.c).  A statically
 * linked runtime builds its graphs through these. */
#include "rgpu_client.h"
#include "cuda_own.h"
#include "cuda_procs.h"

#include <cuda.h>
#include <string.h>

#define LIB (&rgpu_cuda_lib)

/* The procedures the client core sends for the driver's host nodes,
 * copies and launches (common/rgpu_graph_host.c). */
static const struct rgpu_graph_procs graph_procs = {
    RGPU_CUDA_rgpu_cu_graph_host_node, RGPU_CUDA_rgpu_cu_graph_host_params,
    RGPU_CUDA_rgpu_cu_graph_host_copy, RGPU_CUDA_rgpu_cu_capture_host_copy,
    RGPU_CUDA_rgpu_cu_graph_launch,
};

__attribute__((constructor)) static void graph_procs_init(void)
{
    rgpu_graph_procs_register(LIB, &graph_procs);
}

static uint64_t u64(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* ---- host nodes ------------------------------------------------------------------------ */

RGPU_EXPORT CUresult cuGraphAddHostNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_NODE_ADD, hGraph, NULL, NULL,
                                     (void *const *)dependencies, numDependencies };
    uint64_t made = 0;
    if (!phGraphNode || !nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = (CUresult)rgpu_graph_host_node_call(LIB, "cuGraphAddHostNode", &r,
                                                      (void *)nodeParams->fn,
                                                      nodeParams->userData, &made);
    if (rc == CUDA_SUCCESS)
        *phGraphNode = (CUgraphNode)(uintptr_t)made;
    return rc;
}

RGPU_EXPORT CUresult cuGraphHostNodeSetParams(CUgraphNode hNode,
                                              const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_NODE_SET, NULL, NULL, hNode, NULL, 0 };
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    return (CUresult)rgpu_graph_host_node_call(LIB, "cuGraphHostNodeSetParams", &r,
                                               (void *)nodeParams->fn, nodeParams->userData,
                                               NULL);
}

RGPU_EXPORT CUresult cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  const CUDA_HOST_NODE_PARAMS *nodeParams)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_EXEC_SET, NULL, hGraphExec, hNode, NULL, 0 };
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    return (CUresult)rgpu_graph_host_node_call(LIB, "cuGraphExecHostNodeSetParams", &r,
                                               (void *)nodeParams->fn, nodeParams->userData,
                                               NULL);
}

RGPU_EXPORT CUresult cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS *nodeParams)
{
    void *fn = NULL, *data = NULL;
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = (CUresult)rgpu_graph_host_params_call(LIB, "cuGraphHostNodeGetParams",
                                                        u64(hNode), &fn, &data);
    if (rc == CUDA_SUCCESS) {
        nodeParams->fn = (CUhostFn)fn;
        nodeParams->userData = data;
    }
    return rc;
}

/* ---- launches ------------------------------------------------------------------------------ */

RGPU_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return (CUresult)rgpu_graph_launch_call(LIB, "cuGraphLaunch", RGPU_CUDA_cuGraphLaunch,
                                            u64(hGraphExec), u64(hStream), 0);
}

RGPU_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return (CUresult)rgpu_graph_launch_call(LIB, "cuGraphLaunch_ptsz",
                                            RGPU_CUDA_cuGraphLaunch_ptsz, u64(hGraphExec),
                                            u64(hStream), 1);
}

/* ---- copy nodes ------------------------------------------------------------------------- */

/* One side of a copy: 1 on the device (its GPU address in *at), 0 host
 * memory (its address in *at), -1 a CUDA array or an unknown type.  A
 * host or unified address of mapped or managed memory is its GPU copy,
 * as for kernels (common/rgpu_mapped.c). */
static int side_of(CUmemorytype type, const void *host, CUdeviceptr dev, uint64_t *at)
{
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        return rgpu_copy_side_on_device(u64(host), at);
    case CU_MEMORYTYPE_DEVICE:
        (void)rgpu_copy_side_on_device(dev, at);
        return 1;
    case CU_MEMORYTYPE_UNIFIED:
        return rgpu_copy_side_on_device(dev, at);
    default:
        return -1;
    }
}

static CUresult refuse(const char *what, const char *reason)
{
    static int logged;
    return (CUresult)rgpu_refused(LIB, what, reason, &logged);
}

/* The record's operation: both sides on the device by the generated
 * procedure (argv[at] a copy of the record naming the GPU's addresses),
 * else through rgpu_cu_graph_host_copy. */
static CUresult copy_3d(const struct rgpu_graph_node_req *r, const CUDA_MEMCPY3D *p,
                        CUcontext ctx, const char *what, const struct rgpu_proc *gen,
                        const void **argv, unsigned at, uint64_t *made)
{
    uint64_t src, dst;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    int s = side_of(p->srcMemoryType, p->srcHost, p->srcDevice, &src);
    int d = side_of(p->dstMemoryType, p->dstHost, p->dstDevice, &dst);
    if (s < 0 || d < 0)
        return refuse(what, "a graph copy to or from a CUDA array: not remoted yet (copies of "
                            "linear memory are)");
    if (!s && !d)
        return refuse(what, "a graph copy from host memory to host memory: not remoted (copies "
                            "between the host and the device, and on the device, are)");
    if (s && d) {
        CUDA_MEMCPY3D q = *p;
        const CUDA_MEMCPY3D *qp = &q;
        q.srcMemoryType = q.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        q.srcDevice = src;
        q.dstDevice = dst;
        q.srcHost = q.dstHost = NULL;
        argv[at] = &qp;
        return (CUresult)rgpu_call(LIB, gen, argv);
    }
    int dir = d ? RGPU_COPY_TO_DEVICE : RGPU_COPY_TO_HOST;
    struct rgpu_copy_side from = { src, p->srcPitch, p->srcHeight, p->srcXInBytes, p->srcY,
                                   p->srcZ };
    struct rgpu_copy_side to = { dst, p->dstPitch, p->dstHeight, p->dstXInBytes, p->dstY,
                                 p->dstZ };
    struct rgpu_extent e = { p->WidthInBytes, p->Height, p->Depth };
    return (CUresult)rgpu_graph_host_copy_call(LIB, what, r, ctx, dir, d ? &from : &to,
                                               d ? &to : &from, &e, made);
}

RGPU_EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          size_t numDependencies,
                                          const CUDA_MEMCPY3D *copyParams, CUcontext ctx)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_NODE_ADD, hGraph, NULL, NULL,
                                     (void *const *)dependencies, numDependencies };
    const void *argv[] = { &phGraphNode, &hGraph, &dependencies, &numDependencies, NULL, &ctx };
    uint64_t made = 0;
    if (!phGraphNode)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = copy_3d(&r, copyParams, ctx, "cuGraphAddMemcpyNode",
                          RGPU_CUDA_cuGraphAddMemcpyNode, argv, 4, &made);
    if (rc == CUDA_SUCCESS && made)
        *phGraphNode = (CUgraphNode)(uintptr_t)made;
    return rc;
}

RGPU_EXPORT CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode, const CUDA_MEMCPY3D *nodeParams)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_NODE_SET, NULL, NULL, hNode, NULL, 0 };
    const void *argv[] = { &hNode, NULL };
    return copy_3d(&r, nodeParams, NULL, "cuGraphMemcpyNodeSetParams",
                   RGPU_CUDA_cuGraphMemcpyNodeSetParams, argv, 1, NULL);
}

RGPU_EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    const CUDA_MEMCPY3D *copyParams,
                                                    CUcontext ctx)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_EXEC_SET, NULL, hGraphExec, hNode, NULL, 0 };
    const void *argv[] = { &hGraphExec, &hNode, NULL, &ctx };
    return copy_3d(&r, copyParams, ctx, "cuGraphExecMemcpyNodeSetParams",
                   RGPU_CUDA_cuGraphExecMemcpyNodeSetParams, argv, 2, NULL);
}

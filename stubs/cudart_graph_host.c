/* Graph host nodes, graph copies to or from host memory and graph launches
 * through the runtime: the program's function and memory stay here, the
 * server's graph names them by tokens (common/rgpu_graph_host.c,
 * daemon/graph_host.c).  A copy node's sides are told apart as unified
 * addressing does; mapped and managed memory is the GPU's copy there, as
 * for kernels (common/rgpu_mapped.c). */
#include "rgpu_client.h"
#include "cudart_own.h"
#include "cudart_procs.h"

#include <cuda_runtime_api.h>
#include <string.h>

#define LIB (&rgpu_cudart_lib)
#define RESULT(e) rgpu_runtime_result(e)

/* The procedures the client core sends for the runtime's host nodes,
 * copies and launches (common/rgpu_graph_host.c). */
static const struct rgpu_graph_procs graph_procs = {
    RGPU_CUDART_rgpu_graph_host_node, RGPU_CUDART_rgpu_graph_host_params,
    RGPU_CUDART_rgpu_graph_host_copy, RGPU_CUDART_rgpu_capture_host_copy,
    RGPU_CUDART_rgpu_graph_launch,
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

RGPU_EXPORT cudaError_t cudaGraphAddHostNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                             const cudaGraphNode_t *pDependencies,
                                             size_t numDependencies,
                                             const struct cudaHostNodeParams *pNodeParams)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_NODE_ADD, graph, NULL, NULL,
                                     (void *const *)pDependencies, numDependencies };
    uint64_t made = 0;
    if (!pGraphNode || !pNodeParams)
        return RESULT(cudaErrorInvalidValue);
    int rc = rgpu_graph_host_node_call(LIB, "cudaGraphAddHostNode", &r, (void *)pNodeParams->fn,
                                       pNodeParams->userData, &made);
    if (rc == cudaSuccess)
        *pGraphNode = (cudaGraphNode_t)(uintptr_t)made;
    return rc;
}

RGPU_EXPORT cudaError_t cudaGraphHostNodeSetParams(cudaGraphNode_t node,
                                                   const struct cudaHostNodeParams *pNodeParams)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_NODE_SET, NULL, NULL, node, NULL, 0 };
    if (!pNodeParams)
        return RESULT(cudaErrorInvalidValue);
    return rgpu_graph_host_node_call(LIB, "cudaGraphHostNodeSetParams", &r,
                                     (void *)pNodeParams->fn, pNodeParams->userData, NULL);
}

RGPU_EXPORT cudaError_t cudaGraphExecHostNodeSetParams(
    cudaGraphExec_t hGraphExec, cudaGraphNode_t node, const struct cudaHostNodeParams *pNodeParams)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_EXEC_SET, NULL, hGraphExec, node, NULL, 0 };
    if (!pNodeParams)
        return RESULT(cudaErrorInvalidValue);
    return rgpu_graph_host_node_call(LIB, "cudaGraphExecHostNodeSetParams", &r,
                                     (void *)pNodeParams->fn, pNodeParams->userData, NULL);
}

RGPU_EXPORT cudaError_t cudaGraphHostNodeGetParams(cudaGraphNode_t node,
                                                   struct cudaHostNodeParams *pNodeParams)
{
    void *fn = NULL, *data = NULL;
    if (!pNodeParams)
        return RESULT(cudaErrorInvalidValue);
    int rc = rgpu_graph_host_params_call(LIB, "cudaGraphHostNodeGetParams", u64(node), &fn,
                                         &data);
    if (rc == cudaSuccess) {
        pNodeParams->fn = (cudaHostFn_t)fn;
        pNodeParams->userData = data;
    }
    return rc;
}

/* ---- launches ------------------------------------------------------------------------------ */

RGPU_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return rgpu_graph_launch_call(LIB, "cudaGraphLaunch", RGPU_CUDART_cudaGraphLaunch,
                                  u64(graphExec), u64(stream), 0);
}

RGPU_EXPORT cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    return rgpu_graph_launch_call(LIB, "cudaGraphLaunch_ptsz", RGPU_CUDART_cudaGraphLaunch_ptsz,
                                  u64(graphExec), u64(stream), 1);
}

/* ---- copy nodes -------------------------------------------------------------------------- */

/* A 1D copy's plan: both sides device memory (their GPU addresses), or one
 * side host memory. */
struct plan {
    int dir;                    /* 0: device to device, else RGPU_COPY_TO_* */
    uint64_t dst, src;          /* device sides as the GPU names them */
};

/* Which way a copy goes, by its kind, where it is not the default, and by
 * what each pointer is; a host-to-host copy is -1. */
static int direction(int kind, int dst_dev, int src_dev)
{
    if (kind == cudaMemcpyHostToDevice)
        src_dev = 0;
    else if (kind == cudaMemcpyDeviceToHost)
        dst_dev = 0;
    else if (kind == cudaMemcpyHostToHost)
        dst_dev = src_dev = 0;
    if (dst_dev && src_dev)
        return 0;
    return dst_dev ? RGPU_COPY_TO_DEVICE : src_dev ? RGPU_COPY_TO_HOST : -1;
}

static struct plan plan_of(void *dst, const void *src, enum cudaMemcpyKind kind)
{
    struct plan p;
    int d = rgpu_copy_side_on_device(u64(dst), &p.dst);
    int s = rgpu_copy_side_on_device(u64(src), &p.src);
    p.dir = direction(kind, d, s);
    /* A side the kind names host memory but that is mapped memory is its
     * GPU copy all the same: the kind then only says which side is which. */
    if (p.dir == RGPU_COPY_TO_DEVICE && s) p.dir = 0;
    if (p.dir == RGPU_COPY_TO_HOST && d) p.dir = 0;
    return p;
}

static int refuse_host_to_host(const char *what)
{
    static int logged;
    return rgpu_refused(LIB, what, "a graph copy from host memory to host memory: not remoted "
                        "(copies between the host and the device, and on the device, are)",
                        &logged);
}

/* The node operation of a 1D copy with host memory. */
static int host_copy_1d(const char *what, const struct rgpu_graph_node_req *r,
                        const struct plan *p, void *dst, const void *src, size_t count,
                        uint64_t *made)
{
    int to_device = p->dir == RGPU_COPY_TO_DEVICE;
    struct rgpu_copy_side host = { .ptr = to_device ? u64(src) : u64(dst) };
    struct rgpu_copy_side dev = { .ptr = to_device ? p->dst : p->src };
    struct rgpu_extent e = { count, 1, 1 };
    return rgpu_graph_host_copy_call(LIB, what, r, NULL, p->dir, &host, &dev, &e, made);
}

static int invalid_kind(enum cudaMemcpyKind kind)
{
    return (unsigned)kind > cudaMemcpyDefault;
}

#undef cudaGraphAddMemcpyNode1D
RGPU_EXPORT cudaError_t cudaGraphAddMemcpyNode1D(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                 const cudaGraphNode_t *pDependencies,
                                                 size_t numDependencies, void *dst,
                                                 const void *src, size_t count,
                                                 enum cudaMemcpyKind kind)
{
    const char *what = "cudaGraphAddMemcpyNode1D";
    if (!pGraphNode || invalid_kind(kind))
        return RESULT(cudaErrorInvalidValue);
    struct plan p = plan_of(dst, src, kind);
    if (p.dir < 0)
        return refuse_host_to_host(what);
    if (p.dir == 0) {
        void *d = (void *)(uintptr_t)p.dst;
        const void *s = (const void *)(uintptr_t)p.src;
        const void *argv[] = { &pGraphNode, &graph, &pDependencies, &numDependencies, &d, &s,
                               &count, &kind };
        return rgpu_call(LIB, RGPU_CUDART_cudaGraphAddMemcpyNode1D, argv);
    }
    struct rgpu_graph_node_req r = { RGPU_GRAPH_NODE_ADD, graph, NULL, NULL,
                                     (void *const *)pDependencies, numDependencies };
    uint64_t made = 0;
    int rc = host_copy_1d(what, &r, &p, dst, src, count, &made);
    if (rc == cudaSuccess)
        *pGraphNode = (cudaGraphNode_t)(uintptr_t)made;
    return rc;
}

static cudaError_t set_1d(cudaGraphExec_t exec, cudaGraphNode_t node, void *dst,
                          const void *src, size_t count, enum cudaMemcpyKind kind,
                          const char *what)
{
    if (invalid_kind(kind))
        return RESULT(cudaErrorInvalidValue);
    struct plan p = plan_of(dst, src, kind);
    if (p.dir < 0)
        return refuse_host_to_host(what);
    if (p.dir == 0) {
        void *d = (void *)(uintptr_t)p.dst;
        const void *s = (const void *)(uintptr_t)p.src;
        const void *argv_exec[] = { &exec, &node, &d, &s, &count, &kind };
        return exec ? rgpu_call(LIB, RGPU_CUDART_cudaGraphExecMemcpyNodeSetParams1D, argv_exec)
                    : rgpu_call(LIB, RGPU_CUDART_cudaGraphMemcpyNodeSetParams1D, argv_exec + 1);
    }
    struct rgpu_graph_node_req r = { exec ? RGPU_GRAPH_EXEC_SET : RGPU_GRAPH_NODE_SET, NULL, exec,
                                     node, NULL, 0 };
    return host_copy_1d(what, &r, &p, dst, src, count, NULL);
}

#undef cudaGraphMemcpyNodeSetParams1D
RGPU_EXPORT cudaError_t cudaGraphMemcpyNodeSetParams1D(cudaGraphNode_t node, void *dst,
                                                       const void *src, size_t count,
                                                       enum cudaMemcpyKind kind)
{
    return set_1d(NULL, node, dst, src, count, kind, "cudaGraphMemcpyNodeSetParams1D");
}

#undef cudaGraphExecMemcpyNodeSetParams1D
RGPU_EXPORT cudaError_t cudaGraphExecMemcpyNodeSetParams1D(cudaGraphExec_t hGraphExec,
                                                           cudaGraphNode_t node, void *dst,
                                                           const void *src, size_t count,
                                                           enum cudaMemcpyKind kind)
{
    if (!hGraphExec)
        return RESULT(cudaErrorInvalidResourceHandle);
    return set_1d(hGraphExec, node, dst, src, count, kind, "cudaGraphExecMemcpyNodeSetParams1D");
}

/* ---- 3D copy nodes: pitched linear memory (CUDA arrays are not remoted) ---------------- */

static struct rgpu_copy_side side_3d(struct cudaPitchedPtr ptr, struct cudaPos pos, uint64_t at)
{
    struct rgpu_copy_side s = { at, ptr.pitch, ptr.ysize, pos.x, pos.y, pos.z };
    return s;
}

static int refuse_arrays(const char *what)
{
    static int logged;
    return rgpu_refused(LIB, what, "a graph copy to or from a CUDA array: not remoted yet "
                        "(copies of linear memory are)", &logged);
}

/* A 3D record's operation: both sides on the device by the generated
 * procedure (gen: argv with a copy of the record whose pointers name the
 * GPU's addresses), else through rgpu_graph_host_copy. */
static cudaError_t copy_3d(const struct rgpu_graph_node_req *r,
                           const struct cudaMemcpy3DParms *p, const char *what,
                           const struct rgpu_proc *gen, const void **argv, unsigned at,
                           uint64_t *made)
{
    if (!p || invalid_kind(p->kind))
        return RESULT(cudaErrorInvalidValue);
    if (p->srcArray || p->dstArray)
        return refuse_arrays(what);
    uint64_t dst, src;
    int d = rgpu_copy_side_on_device(u64(p->dstPtr.ptr), &dst);
    int s = rgpu_copy_side_on_device(u64(p->srcPtr.ptr), &src);
    int dir = direction(p->kind, d, s);
    if ((dir == RGPU_COPY_TO_DEVICE && s) || (dir == RGPU_COPY_TO_HOST && d))
        dir = 0;
    if (dir < 0)
        return refuse_host_to_host(what);
    if (dir == 0) {
        struct cudaMemcpy3DParms q = *p;
        const struct cudaMemcpy3DParms *qp = &q;
        q.dstPtr.ptr = (void *)(uintptr_t)dst;
        q.srcPtr.ptr = (void *)(uintptr_t)src;
        argv[at] = &qp;
        return rgpu_call(LIB, gen, argv);
    }
    int to_device = dir == RGPU_COPY_TO_DEVICE;
    struct rgpu_copy_side host = to_device ? side_3d(p->srcPtr, p->srcPos, src)
                                           : side_3d(p->dstPtr, p->dstPos, dst);
    struct rgpu_copy_side dev = to_device ? side_3d(p->dstPtr, p->dstPos, dst)
                                          : side_3d(p->srcPtr, p->srcPos, src);
    struct rgpu_extent e = { p->extent.width, p->extent.height, p->extent.depth };
    return rgpu_graph_host_copy_call(LIB, what, r, NULL, dir, &host, &dev, &e, made);
}

RGPU_EXPORT cudaError_t cudaGraphAddMemcpyNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                               const cudaGraphNode_t *pDependencies,
                                               size_t numDependencies,
                                               const struct cudaMemcpy3DParms *pCopyParams)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_NODE_ADD, graph, NULL, NULL,
                                     (void *const *)pDependencies, numDependencies };
    const void *argv[] = { &pGraphNode, &graph, &pDependencies, &numDependencies, NULL };
    uint64_t made = 0;
    if (!pGraphNode)
        return RESULT(cudaErrorInvalidValue);
    int rc = copy_3d(&r, pCopyParams, "cudaGraphAddMemcpyNode", RGPU_CUDART_cudaGraphAddMemcpyNode,
                     argv, 4, &made);
    if (rc == cudaSuccess && made)
        *pGraphNode = (cudaGraphNode_t)(uintptr_t)made;
    return rc;
}

RGPU_EXPORT cudaError_t cudaGraphMemcpyNodeSetParams(cudaGraphNode_t node,
                                                     const struct cudaMemcpy3DParms *pNodeParams)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_NODE_SET, NULL, NULL, node, NULL, 0 };
    const void *argv[] = { &node, NULL };
    return copy_3d(&r, pNodeParams, "cudaGraphMemcpyNodeSetParams",
                   RGPU_CUDART_cudaGraphMemcpyNodeSetParams, argv, 1, NULL);
}

RGPU_EXPORT cudaError_t cudaGraphExecMemcpyNodeSetParams(
    cudaGraphExec_t hGraphExec, cudaGraphNode_t node, const struct cudaMemcpy3DParms *pNodeParams)
{
    struct rgpu_graph_node_req r = { RGPU_GRAPH_EXEC_SET, NULL, hGraphExec, node, NULL, 0 };
    const void *argv[] = { &hGraphExec, &node, NULL };
    if (!hGraphExec)
        return RESULT(cudaErrorInvalidResourceHandle);
    return copy_3d(&r, pNodeParams, "cudaGraphExecMemcpyNodeSetParams",
                   RGPU_CUDART_cudaGraphExecMemcpyNodeSetParams, argv, 2, NULL);
}

/* ---- copy nodes to and from __device__ variables ------------------------------------------ */

int rgpu_cudart_symbol(const void *symbol, uint64_t *dev, size_t *size);

/* The variable's address count bytes from offset, which must lie inside
 * it; 0 with *rc set when not. */
static uint64_t symbol_at(const void *symbol, size_t count, size_t offset, int *rc)
{
    uint64_t dev;
    size_t size;
    *rc = rgpu_cudart_symbol(symbol, &dev, &size);
    if (*rc == cudaSuccess && (offset > size || count > size - offset))
        *rc = RESULT(cudaErrorInvalidValue);
    return *rc == cudaSuccess ? dev + offset : 0;
}

/* The variable is device memory: a kind that names its side host memory
 * is refused (as -1, an invalid kind), as the library refuses it. */
static enum cudaMemcpyKind symbol_kind(enum cudaMemcpyKind kind, int to_symbol)
{
    int ok = kind == cudaMemcpyDefault || kind == cudaMemcpyDeviceToDevice ||
             kind == (to_symbol ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    return ok ? kind : (enum cudaMemcpyKind)-1;
}

RGPU_EXPORT cudaError_t cudaGraphAddMemcpyNodeToSymbol(cudaGraphNode_t *pGraphNode,
                                                       cudaGraph_t graph,
                                                       const cudaGraphNode_t *pDependencies,
                                                       size_t numDependencies,
                                                       const void *symbol, const void *src,
                                                       size_t count, size_t offset,
                                                       enum cudaMemcpyKind kind)
{
    int rc;
    uint64_t dst = symbol_at(symbol, count, offset, &rc);
    if (!dst)
        return rc;
    return cudaGraphAddMemcpyNode1D(pGraphNode, graph, pDependencies, numDependencies,
                                    (void *)(uintptr_t)dst, src, count, symbol_kind(kind, 1));
}

RGPU_EXPORT cudaError_t cudaGraphAddMemcpyNodeFromSymbol(cudaGraphNode_t *pGraphNode,
                                                         cudaGraph_t graph,
                                                         const cudaGraphNode_t *pDependencies,
                                                         size_t numDependencies, void *dst,
                                                         const void *symbol, size_t count,
                                                         size_t offset, enum cudaMemcpyKind kind)
{
    int rc;
    uint64_t src = symbol_at(symbol, count, offset, &rc);
    if (!src)
        return rc;
    return cudaGraphAddMemcpyNode1D(pGraphNode, graph, pDependencies, numDependencies, dst,
                                    (const void *)(uintptr_t)src, count, symbol_kind(kind, 0));
}

RGPU_EXPORT cudaError_t cudaGraphMemcpyNodeSetParamsToSymbol(cudaGraphNode_t node,
                                                             const void *symbol, const void *src,
                                                             size_t count, size_t offset,
                                                             enum cudaMemcpyKind kind)
{
    int rc;
    uint64_t dst = symbol_at(symbol, count, offset, &rc);
    if (!dst)
        return rc;
    return set_1d(NULL, node, (void *)(uintptr_t)dst, src, count, symbol_kind(kind, 1),
                  "cudaGraphMemcpyNodeSetParamsToSymbol");
}

RGPU_EXPORT cudaError_t cudaGraphMemcpyNodeSetParamsFromSymbol(cudaGraphNode_t node, void *dst,
                                                               const void *symbol, size_t count,
                                                               size_t offset,
                                                               enum cudaMemcpyKind kind)
{
    int rc;
    uint64_t src = symbol_at(symbol, count, offset, &rc);
    if (!src)
        return rc;
    return set_1d(NULL, node, dst, (const void *)(uintptr_t)src, count, symbol_kind(kind, 0),
                  "cudaGraphMemcpyNodeSetParamsFromSymbol");
}

RGPU_EXPORT cudaError_t cudaGraphExecMemcpyNodeSetParamsToSymbol(
    cudaGraphExec_t hGraphExec, cudaGraphNode_t node, const void *symbol, const void *src,
    size_t count, size_t offset, enum cudaMemcpyKind kind)
{
    int rc;
    uint64_t dst = symbol_at(symbol, count, offset, &rc);
    if (!dst)
        return rc;
    return cudaGraphExecMemcpyNodeSetParams1D(hGraphExec, node, (void *)(uintptr_t)dst, src,
                                              count, symbol_kind(kind, 1));
}

RGPU_EXPORT cudaError_t cudaGraphExecMemcpyNodeSetParamsFromSymbol(
    cudaGraphExec_t hGraphExec, cudaGraphNode_t node, void *dst, const void *symbol,
    size_t count, size_t offset, enum cudaMemcpyKind kind)
{
    int rc;
    uint64_t src = symbol_at(symbol, count, offset, &rc);
    if (!src)
        return rc;
    return cudaGraphExecMemcpyNodeSetParams1D(hGraphExec, node, dst,
                                              (const void *)(uintptr_t)src, count,
                                              symbol_kind(kind, 0));
}
